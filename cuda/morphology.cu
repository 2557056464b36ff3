/* Erosion and dilation of a uint8 image on the GPU: each block loads its
 * tile with a halo as deep as the element reaches (the neutral value
 * outside the image) into shared memory, then each thread takes the minimum
 * or maximum over the element's runs for a column of the tile's rows. Exact
 * by construction: only min and max of bytes. See morphology_launch.h. */
#include <stdint.h>

#include "grid.h"
#include "morphology_launch.h"

namespace {

constexpr int kTileW = 64;
constexpr int kTileH = 16;
constexpr int kMaxReach = FM_MORPH_MAX_SIDE / 2;
/* A warp spans a row of the tile: loads coalesce; each thread then goes
 * down kTileH / 4 rows. */
const dim3 kBlock(kTileW, 4);

template <bool Dilate>
__device__ __forceinline__ unsigned char pick(unsigned char a, unsigned char b)
{
    return Dilate ? (a > b ? a : b) : (a < b ? a : b);
}

/* The halo is the element's reach, not the largest element's: a 3x3 element
 * loads 1.2 bytes per output byte, not 9 (the kernel is bound by loads). */
template <bool Dilate>
__global__ void morphology_kernel(const unsigned char *__restrict__ src, size_t src_pitch,
                                  unsigned char *__restrict__ dst, size_t dst_pitch,
                                  int width, int height, fm_morph_element element,
                                  int reach_x, int reach_y, int binarize)
{
    extern __shared__ unsigned char tile[];
    const unsigned char neutral = Dilate ? 0 : 255;
    const int shared_w = kTileW + 2 * reach_x, shared_h = kTileH + 2 * reach_y;
    const int x0 = (int)(blockIdx.x * kTileW) - reach_x;
    const int y0 = (int)(blockIdx.y * kTileH) - reach_y;
    for (int ty = (int)threadIdx.y; ty < shared_h; ty += (int)blockDim.y) {
        const int y = y0 + ty;
        const bool row_inside = y >= 0 && y < height;
        const unsigned char *src_row = src + (size_t)(row_inside ? y : 0) * src_pitch;
        for (int tx = (int)threadIdx.x; tx < shared_w; tx += (int)blockDim.x) {
            const int x = x0 + tx;
            unsigned char v = neutral;
            if (row_inside && x >= 0 && x < width) {
                v = src_row[x];
                if (binarize >= 0)
                    v = v == binarize ? 255 : 0;
            }
            tile[ty * shared_w + tx] = v;
        }
    }
    __syncthreads();
    const int x = (int)(blockIdx.x * kTileW + threadIdx.x);
    if (x >= width)
        return;
    for (int ly = (int)threadIdx.y; ly < kTileH; ly += (int)blockDim.y) {
        const int y = (int)(blockIdx.y * kTileH) + ly;
        if (y >= height)
            return;
        unsigned char acc = neutral;
        for (int r = 0; r < element.n_runs; ++r) {
            const unsigned char *run = &tile[(ly + reach_y + element.dy[r]) * shared_w
                                             + (int)threadIdx.x + reach_x + element.dx[r]];
            for (int i = 0; i < element.len[r]; ++i)
                acc = pick<Dilate>(acc, run[i]);
        }
        dst[(size_t)y * dst_pitch + x] = acc;
    }
}

bool is_u8_plane(const fm_image &im)
{
    return im.data != nullptr && im.channels == 1 && im.elem_size == 1
           && (im.height == 1 || im.pitch >= (size_t)im.width);
}

/* Whether the element's runs lie within the largest element, and how far
 * they reach from the anchor across and down. */
bool runs_fit(const fm_morph_element &e, int *reach_x, int *reach_y)
{
    if (e.n_runs < 1 || e.n_runs > FM_MORPH_MAX_RUNS)
        return false;
    *reach_x = *reach_y = 0;
    for (int r = 0; r < e.n_runs; ++r) {
        const int left = e.dx[r], right = e.dx[r] + e.len[r] - 1;
        if (e.len[r] < 1 || e.dy[r] < -kMaxReach || e.dy[r] > kMaxReach || left < -kMaxReach
            || right > kMaxReach)
            return false;
        *reach_x = max(*reach_x, max(-left, right));
        *reach_y = max(*reach_y, e.dy[r] < 0 ? -e.dy[r] : e.dy[r]);
    }
    return true;
}

}  // namespace

extern "C" cudaError_t fm_launch_morphology(fm_image src, fm_image dst,
                                            const fm_morph_element *element, int dilate,
                                            int binarize, cudaStream_t stream)
{
    int reach_x, reach_y;
    if (element == nullptr || !runs_fit(*element, &reach_x, &reach_y) || !is_u8_plane(src)
        || !is_u8_plane(dst) || src.width != dst.width || src.height != dst.height
        || src.width <= 0 || src.height <= 0 || binarize > 255)
        return cudaErrorInvalidValue;
    const dim3 grid(fm_div_up((unsigned)src.width, kTileW),
                    fm_div_up((unsigned)src.height, kTileH));
    if (grid.y > 65535u)
        return cudaErrorInvalidValue;
    /* at most (16 + 30) x (64 + 30) bytes: under the 48 KB a launch may ask */
    const size_t shared = (size_t)(kTileH + 2 * reach_y) * (size_t)(kTileW + 2 * reach_x);
    auto kernel = dilate ? morphology_kernel<true> : morphology_kernel<false>;
    kernel<<<grid, kBlock, shared, stream>>>(static_cast<const unsigned char *>(src.data),
                                             src.pitch, static_cast<unsigned char *>(dst.data),
                                             dst.pitch, src.width, src.height, *element,
                                             reach_x, reach_y, binarize);
    return cudaGetLastError();
}
