/* Erosion and dilation of a uint8 image on the GPU: each block loads its
 * tile with a halo of half the largest element into shared memory (the
 * neutral value outside the image), then each thread takes the minimum or
 * maximum over the element's runs. Exact by construction: only min and max
 * of bytes. See morphology_launch.h. */
#include <stdint.h>

#include "grid.h"
#include "morphology_launch.h"

namespace {

constexpr int kTileW = 32;
constexpr int kTileH = 8;
constexpr int kHalo = FM_MORPH_MAX_SIDE / 2;
constexpr int kSharedW = kTileW + 2 * kHalo;
constexpr int kSharedH = kTileH + 2 * kHalo;
const dim3 kBlock(kTileW, kTileH);

template <bool Dilate>
__device__ __forceinline__ unsigned char pick(unsigned char a, unsigned char b)
{
    return Dilate ? (a > b ? a : b) : (a < b ? a : b);
}

template <bool Dilate>
__global__ void morphology_kernel(const unsigned char *__restrict__ src, size_t src_pitch,
                                  unsigned char *__restrict__ dst, size_t dst_pitch,
                                  int width, int height, fm_morph_element element)
{
    __shared__ unsigned char tile[kSharedH][kSharedW];
    const unsigned char neutral = Dilate ? 0 : 255;
    const int x0 = (int)(blockIdx.x * kTileW) - kHalo;
    const int y0 = (int)(blockIdx.y * kTileH) - kHalo;
    for (int i = threadIdx.y * kTileW + threadIdx.x; i < kSharedH * kSharedW;
         i += kTileW * kTileH) {
        const int ty = i / kSharedW, tx = i % kSharedW;
        const int y = y0 + ty, x = x0 + tx;
        tile[ty][tx] = (x >= 0 && x < width && y >= 0 && y < height)
                           ? src[(size_t)y * src_pitch + x] : neutral;
    }
    __syncthreads();
    const int x = (int)(blockIdx.x * kTileW + threadIdx.x);
    const int y = (int)(blockIdx.y * kTileH + threadIdx.y);
    if (x >= width || y >= height)
        return;
    unsigned char acc = neutral;
    for (int r = 0; r < element.n_runs; ++r) {
        const unsigned char *row =
            &tile[threadIdx.y + kHalo + element.dy[r]][threadIdx.x + kHalo + element.dx[r]];
        for (int i = 0; i < element.len[r]; ++i)
            acc = pick<Dilate>(acc, row[i]);
    }
    dst[(size_t)y * dst_pitch + x] = acc;
}

bool is_u8_plane(const fm_image &im)
{
    return im.data != nullptr && im.channels == 1 && im.elem_size == 1
           && (im.height == 1 || im.pitch >= (size_t)im.width);
}

bool runs_fit(const fm_morph_element &e)
{
    if (e.n_runs < 1 || e.n_runs > FM_MORPH_MAX_RUNS)
        return false;
    for (int r = 0; r < e.n_runs; ++r)
        if (e.len[r] < 1 || e.dy[r] < -kHalo || e.dy[r] > kHalo || e.dx[r] < -kHalo
            || e.dx[r] + e.len[r] - 1 > kHalo)
            return false;
    return true;
}

}  // namespace

extern "C" cudaError_t fm_launch_morphology(fm_image src, fm_image dst,
                                            const fm_morph_element *element, int dilate,
                                            cudaStream_t stream)
{
    if (element == nullptr || !runs_fit(*element) || !is_u8_plane(src) || !is_u8_plane(dst)
        || src.width != dst.width || src.height != dst.height || src.width <= 0
        || src.height <= 0)
        return cudaErrorInvalidValue;
    const dim3 grid(fm_div_up((unsigned)src.width, kBlock.x),
                    fm_div_up((unsigned)src.height, kBlock.y));
    if (grid.y > 65535u)
        return cudaErrorInvalidValue;
    auto kernel = dilate ? morphology_kernel<true> : morphology_kernel<false>;
    kernel<<<grid, kBlock, 0, stream>>>(static_cast<const unsigned char *>(src.data), src.pitch,
                                        static_cast<unsigned char *>(dst.data), dst.pitch,
                                        src.width, src.height, *element);
    return cudaGetLastError();
}
