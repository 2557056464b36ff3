// NV12/NV21 -> BGR/RGB kernel: the per-pixel maths of nv12_pixel.h (shared
// with the host reference src/nv12_loop.c), four columns of two rows per thread.
#include <stdint.h>

#include "nv12_launch.h"
#include "nv12_pixel.h"
#include "grid.h"

namespace {

// Packs 4 output bytes, first byte lowest (little-endian, as the GPU stores).
__device__ inline uint32_t pack4(const unsigned char *b)
{
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

// Two chroma pairs (4 bytes as stored) serve the four luma bytes of one row:
// writes 12 output bytes, 4 pixels.
__device__ inline void convert_row4(const fm_yuv_matrix &m, const fm_yuv_chroma &left,
                                    const fm_yuv_chroma &right, uint32_t luma,
                                    unsigned char *px)
{
    fm_yuv_pixel(&m, &left, (int)(luma & 0xffu), px);
    fm_yuv_pixel(&m, &left, (int)(luma >> 8 & 0xffu), px + 3);
    fm_yuv_pixel(&m, &right, (int)(luma >> 16 & 0xffu), px + 6);
    fm_yuv_pixel(&m, &right, (int)(luma >> 24), px + 9);
}

// One thread per 4 columns x 2 rows (two 2x2 blocks): a warp reads 128
// contiguous luma bytes of each row and 128 chroma bytes, and writes 384
// contiguous output bytes per row. Aligned: every base and pitch is a
// multiple of 4, so whole groups use 32-bit loads and stores; the rest (and a
// last group of 2 columns when width % 4 == 2) goes byte by byte.
template <bool Aligned>
__global__ void nv12_to_bgr_kernel(const unsigned char *__restrict__ y, size_t y_pitch,
                                   const unsigned char *__restrict__ uv, size_t uv_pitch,
                                   unsigned char *__restrict__ out, size_t out_pitch,
                                   int width, int half_height, fm_yuv_matrix m, int flags)
{
    const int x0 = (int)(blockIdx.x * blockDim.x + threadIdx.x) * 4;
    const int r = (int)(blockIdx.y * blockDim.y + threadIdx.y);
    if (x0 >= width || r >= half_height)
        return;
    const unsigned char *y0 = y + (size_t)(2 * r) * y_pitch + x0;
    const unsigned char *y1 = y0 + y_pitch;
    const unsigned char *c = uv + (size_t)r * uv_pitch + x0;
    unsigned char *o0 = out + (size_t)(2 * r) * out_pitch + (size_t)x0 * 3;
    unsigned char *o1 = o0 + out_pitch;

    if (Aligned && x0 + 4 <= width) {
        const uint32_t cw = *reinterpret_cast<const uint32_t *>(c);
        const uint32_t l0 = *reinterpret_cast<const uint32_t *>(y0);
        const uint32_t l1 = *reinterpret_cast<const uint32_t *>(y1);
        const fm_yuv_chroma left =
            fm_yuv_chroma_terms(&m, (int)(cw & 0xffu), (int)(cw >> 8 & 0xffu), flags);
        const fm_yuv_chroma right =
            fm_yuv_chroma_terms(&m, (int)(cw >> 16 & 0xffu), (int)(cw >> 24), flags);
        unsigned char px[12];  // constant indices only: stays in registers
        uint32_t *w0 = reinterpret_cast<uint32_t *>(o0);
        uint32_t *w1 = reinterpret_cast<uint32_t *>(o1);
        convert_row4(m, left, right, l0, px);
        w0[0] = pack4(px);
        w0[1] = pack4(px + 4);
        w0[2] = pack4(px + 8);
        convert_row4(m, left, right, l1, px);
        w1[0] = pack4(px);
        w1[1] = pack4(px + 4);
        w1[2] = pack4(px + 8);
        return;
    }
#pragma unroll
    for (int dx = 0; dx < 4; dx += 2) {
        if (x0 + dx >= width)
            break;
        const fm_yuv_chroma terms = fm_yuv_chroma_terms(&m, c[dx], c[dx + 1], flags);
        fm_yuv_pixel(&m, &terms, y0[dx], o0 + dx * 3);
        fm_yuv_pixel(&m, &terms, y0[dx + 1], o0 + dx * 3 + 3);
        fm_yuv_pixel(&m, &terms, y1[dx], o1 + dx * 3);
        fm_yuv_pixel(&m, &terms, y1[dx + 1], o1 + dx * 3 + 3);
    }
}

const dim3 kBlock(32, 8);

// Largest side: keeps x0 + 4 and every int product in range.
const int kMaxSide = 1 << 28;

bool is_u8(const fm_image &im, int channels)
{
    return im.data != nullptr && im.channels == channels && im.elem_size == 1;
}

// A pitch shorter than a row would make rows overlap; it only matters when
// there is more than one row.
bool pitch_ok(const fm_image &im, int row_bytes)
{
    return im.height == 1 || im.pitch >= (size_t)row_bytes;
}

bool aligned4(const fm_image &im)
{
    return ((uintptr_t)im.data | (uintptr_t)im.pitch) % 4 == 0;
}

}  // namespace

extern "C" cudaError_t fm_launch_nv12_to_bgr(fm_image y, fm_image uv, fm_image out,
                                             int matrix, int flags, cudaStream_t stream)
{
    fm_yuv_matrix m;
    if (fm_yuv_matrix_get(matrix, &m) != 0 || (flags & ~FM_YUV_FLAGS_ALL) != 0)
        return cudaErrorInvalidValue;
    const int width = y.width, height = y.height;
    if (width <= 0 || height <= 0 || width % 2 != 0 || height % 2 != 0
        || width > kMaxSide || height > kMaxSide
        || !is_u8(y, 1) || !is_u8(uv, 2) || !is_u8(out, 3)
        || uv.width != width / 2 || uv.height != height / 2
        || out.width != width || out.height != height
        || !pitch_ok(y, width) || !pitch_ok(uv, width) || !pitch_ok(out, width * 3))
        return cudaErrorInvalidValue;
    const int half_height = height / 2;
    const dim3 grid(fm_div_up(fm_div_up((unsigned)width, 4u), kBlock.x),
                    fm_div_up((unsigned)half_height, kBlock.y));
    if (grid.y > 65535u)
        return cudaErrorInvalidValue;
    const bool aligned = aligned4(y) && aligned4(uv) && aligned4(out);
    auto kernel = aligned ? nv12_to_bgr_kernel<true> : nv12_to_bgr_kernel<false>;
    kernel<<<grid, kBlock, 0, stream>>>(
        static_cast<const unsigned char *>(y.data), y.pitch,
        static_cast<const unsigned char *>(uv.data), uv.pitch,
        static_cast<unsigned char *>(out.data), out.pitch, width, half_height, m, flags);
    return cudaGetLastError();
}
