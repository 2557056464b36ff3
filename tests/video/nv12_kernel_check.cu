// Standalone GPU check of the NV12 launcher (cuda/nv12.cu) against the host
// reference (src/nv12_loop.c, itself equal to cv2 on all 2^24 triples), needing
// no Python binding; tests/video/test_nv12.py builds and runs it on GPU machines.
// Exit status 0 when every byte matches, and every border byte is untouched.
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>

#include "nv12_launch.h"
#include "../src/nv12_loop.h"

#define CHECK(call)                                                                   \
    do {                                                                              \
        cudaError_t e_ = (call);                                                      \
        if (e_ != cudaSuccess) {                                                      \
            std::printf("%s failed: %s (line %d)\n", #call, cudaGetErrorName(e_), __LINE__); \
            std::exit(2);                                                             \
        }                                                                             \
    } while (0)

namespace {

const unsigned char kBorder = 0x5a;

struct Layout {
    int y_pad, y_off;    // extra bytes per luma row, and where the row starts
    int c_pad, c_off;    // the same for chroma
    int o_pad, o_off;    // the same for the output
    bool shared;         // chroma right after the luma rows in one allocation
};

unsigned g_rng = 12345;
unsigned char random_byte()
{
    g_rng = g_rng * 1103515245u + 12345u;
    return (unsigned char)(g_rng >> 16);
}

// Converts packed planes (pitch W) on the GPU in layout L; returns the number
// of wrong bytes, borders included. *ms: mean kernel time over 20 launches.
long check(const std::vector<unsigned char> &y, const std::vector<unsigned char> &uv, int W,
           int H, const Layout &L, int flags, float *ms)
{
    std::vector<unsigned char> ref((size_t)W * H * 3);
    if (fm_nv12_to_bgr_cpu(y.data(), W, uv.data(), W, ref.data(), (size_t)W * 3, W, H,
                           FM_YUV_MATRIX_BT601, flags) != FM_YUV_OK) {
        std::printf("host reference refused %dx%d\n", H, W);
        std::exit(2);
    }
    const size_t yp = W + L.y_pad + L.y_off;
    size_t cp = W + L.c_pad + L.c_off;
    const size_t op = (size_t)W * 3 + L.o_pad + L.o_off;
    unsigned char *ybase, *cbase = nullptr, *obase;
    unsigned char *dy, *dc;
    if (L.shared) {
        CHECK(cudaMalloc(&ybase, yp * H + yp * (H / 2)));
        dy = ybase + L.y_off;
        dc = ybase + yp * H + L.y_off;
        cp = yp;
    } else {
        CHECK(cudaMalloc(&ybase, yp * H));
        CHECK(cudaMalloc(&cbase, cp * (H / 2)));
        dy = ybase + L.y_off;
        dc = cbase + L.c_off;
    }
    CHECK(cudaMalloc(&obase, op * H));
    CHECK(cudaMemset(obase, kBorder, op * H));
    CHECK(cudaMemcpy2D(dy, yp, y.data(), W, W, H, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy2D(dc, cp, uv.data(), W, W, H / 2, cudaMemcpyHostToDevice));
    const fm_image iy = {dy, yp, W, H, 1, 1};
    const fm_image ic = {dc, cp, W / 2, H / 2, 2, 1};
    const fm_image io = {obase + L.o_off, op, W, H, 3, 1};

    cudaStream_t s;
    cudaEvent_t start, stop;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&stop));
    CHECK(fm_launch_nv12_to_bgr(iy, ic, io, FM_YUV_MATRIX_BT601, flags, s));  // warm-up
    CHECK(cudaEventRecord(start, s));
    for (int i = 0; i < 20; i++)
        CHECK(fm_launch_nv12_to_bgr(iy, ic, io, FM_YUV_MATRIX_BT601, flags, s));
    CHECK(cudaEventRecord(stop, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaEventElapsedTime(ms, start, stop));
    *ms /= 20;

    std::vector<unsigned char> got(op * H);
    CHECK(cudaMemcpy(got.data(), obase, op * H, cudaMemcpyDeviceToHost));
    long bad = 0;
    for (int r = 0; r < H; r++) {
        for (size_t i = 0; i < op; i++) {
            const bool inside = i >= (size_t)L.o_off && i < (size_t)L.o_off + (size_t)W * 3;
            const unsigned char want = inside ? ref[(size_t)r * W * 3 + (i - L.o_off)] : kBorder;
            bad += got[(size_t)r * op + i] != want;
        }
    }
    CHECK(cudaFree(ybase));
    if (cbase != nullptr)
        CHECK(cudaFree(cbase));
    CHECK(cudaFree(obase));
    CHECK(cudaEventDestroy(start));
    CHECK(cudaEventDestroy(stop));
    CHECK(cudaStreamDestroy(s));
    return bad;
}

}  // namespace

int main()
{
    long total = 0;
    float ms;

    // Every (Y, U, V) once: 2^22 blocks = 65,536 (U, V) pairs x 64 luma groups.
    const int W = 4096, H = 4096;
    std::vector<unsigned char> y((size_t)W * H), uv((size_t)W * H / 2);
    for (int by = 0; by < H / 2; by++) {
        for (int bx = 0; bx < W / 2; bx++) {
            const unsigned k = (unsigned)(by * (W / 2) + bx);
            uv[(size_t)by * W + 2 * bx] = (unsigned char)(k & 255);
            uv[(size_t)by * W + 2 * bx + 1] = (unsigned char)(k >> 8 & 255);
            for (int d = 0; d < 4; d++)
                y[(size_t)(2 * by + d / 2) * W + 2 * bx + d % 2] = (unsigned char)(4 * (k >> 16) + d);
        }
    }
    const Layout packed = {0, 0, 0, 0, 0, 0, false};
    const Layout odd = {3, 1, 5, 2, 7, 1, false};
    for (int flags = 0; flags <= FM_YUV_FLAGS_ALL; flags++) {
        for (const Layout *L : {&packed, &odd}) {
            const long bad = check(y, uv, W, H, *L, flags, &ms);
            std::printf("all 2^24 triples, flags %d, %s layout: %ld wrong bytes, %.3f ms\n",
                        flags, L == &packed ? "packed" : "unaligned", bad, ms);
            total += bad;
        }
    }

    // Random frames: sizes with width % 4 == 0 and == 2, aligned and unaligned
    // pitches and bases, chroma apart or right after the luma.
    const int sizes[][2] = {{2, 2}, {2, 6}, {4, 4}, {6, 10}, {16, 18}, {120, 162},
                            {34, 1002}, {1080, 1920}, {2160, 3840}};
    const Layout layouts[] = {{0, 0, 0, 0, 0, 0, false},   {64, 0, 32, 0, 64, 0, false},
                              {1, 0, 3, 0, 2, 0, false},   {4, 1, 8, 2, 1, 3, false},
                              {13, 3, 0, 1, 12, 4, false}, {0, 0, 0, 0, 0, 0, true},
                              {60, 0, 0, 0, 0, 0, true},   {3, 1, 0, 0, 5, 2, true}};
    for (const auto &sz : sizes) {
        const int h = sz[0], w = sz[1];
        std::vector<unsigned char> yy((size_t)w * h), cc((size_t)w * h / 2);
        for (auto &v : yy)
            v = random_byte();
        for (auto &v : cc)
            v = random_byte();
        for (const Layout &L : layouts) {
            for (int flags = 0; flags <= FM_YUV_FLAGS_ALL; flags++) {
                const long bad = check(yy, cc, w, h, L, flags, &ms);
                total += bad;
                if (bad != 0 || (h == 2160 && flags == 0 && &L == &layouts[0]))
                    std::printf("%dx%d, layout %d, flags %d: %ld wrong bytes, %.4f ms\n", h, w,
                                (int)(&L - layouts), flags, bad, ms);
            }
        }
    }

    // Refusals queue nothing and say cudaErrorInvalidValue.
    unsigned char *p;
    CHECK(cudaMalloc(&p, 256));
    const fm_image iy = {p, 8, 8, 4, 1, 1}, ic = {p, 8, 4, 2, 2, 1}, io = {p, 24, 8, 4, 3, 1};
    fm_image odd_width = iy, short_pitch = io, wrong_uv = ic;
    odd_width.width = 7;
    short_pitch.pitch = 23;
    wrong_uv.channels = 1;
    const int refused = (fm_launch_nv12_to_bgr(odd_width, ic, io, 0, 0, 0) == cudaErrorInvalidValue)
                        + (fm_launch_nv12_to_bgr(iy, ic, short_pitch, 0, 0, 0) == cudaErrorInvalidValue)
                        + (fm_launch_nv12_to_bgr(iy, wrong_uv, io, 0, 0, 0) == cudaErrorInvalidValue)
                        + (fm_launch_nv12_to_bgr(iy, ic, io, 1, 0, 0) == cudaErrorInvalidValue)
                        + (fm_launch_nv12_to_bgr(iy, ic, io, 0, 4, 0) == cudaErrorInvalidValue);
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaFree(p));
    std::printf("refusals: %d of 5; wrong bytes in all: %ld\n", refused, total);
    return total == 0 && refused == 5 ? 0 : 1;
}
