/* Erosion and dilation of uint8 images on the GPU: each block loads its
 * tile with a halo as deep as the element reaches (the neutral value
 * outside the image) into shared memory as 32-bit words, then each thread
 * takes the minimum or maximum over the element's runs for 4 neighbouring
 * pixels at once (one word) in a column of the tile's rows; the grid's z is
 * the image, so many cameras' masks take one launch. An opening or closing
 * with an element up to 5x5 keeps its first pass in shared memory and
 * makes both in one launch; the 3x3 opening or closing of a binary mask
 * works on bits instead, a lane's 8 pixels of 4 rows a word in a warp's
 * registers (morphology_bits.h). Exact by
 * construction: only min and max of bytes (AND and OR where the bytes are
 * 0 or 255, or of bits). See morphology_launch.h. */
#include <stdint.h>

#include "grid.h"
#include "morphology_bits.h"
#include "morphology_launch.h"

namespace {

/* A warp spans the tile's width, 4 pixels a thread: its word loads
 * coalesce; each thread then goes down kTileH / 8 rows. */
constexpr int kTileW = 128;
constexpr int kTileH = 32;
const dim3 kBlock(kTileW / 4, 8);
constexpr int kMaxReach = FM_MORPH_MAX_SIDE / 2;
/* Images one launch of a set takes: their pointers travel as a kernel
 * parameter (1 KB for 32, beside the 1.4 KB element, under the 4 KB every
 * architecture and toolkit accepts). */
constexpr int kSetMax = 32;

/* The images of one launch, all W x H: image z reads src[z], writes dst[z]. */
template <int N>
struct image_set {
    const unsigned char *src[N];
    unsigned char *dst[N];
    size_t src_pitch[N];
    size_t dst_pitch[N];
};

/* Four bytes' minimum (erosion) or maximum (dilation) at once; of bytes
 * that are only 0 and 255, AND and OR. */
template <bool Dilate, bool Binary>
__device__ __forceinline__ uint32_t pick4(uint32_t a, uint32_t b)
{
    if (Binary)
        return Dilate ? (a | b) : (a & b);
    return Dilate ? __vmaxu4(a, b) : __vminu4(a, b);
}

/* Bytes x .. x + 3 of a row as one word, x a multiple of 4: the neutral
 * value outside the image; with binarize 0-255, 255 where the byte equals
 * it and 0 elsewhere. */
template <bool Dilate>
__device__ __forceinline__ uint32_t load4(const unsigned char *row, int x, int width,
                                          int binarize, bool aligned)
{
    if (aligned && x >= 0 && x + 3 < width) {
        const uint32_t v = *reinterpret_cast<const uint32_t *>(row + x);
        return binarize >= 0 ? __vcmpeq4(v, 0x01010101u * (uint32_t)binarize) : v;
    }
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
        uint32_t b = Dilate ? 0u : 255u;
        if (x + k >= 0 && x + k < width) {
            b = row[x + k];
            if (binarize >= 0)
                b = b == (uint32_t)binarize ? 255u : 0u;
        }
        v |= b << (8 * k);
    }
    return v;
}

/* One word's minimum or maximum over the element's runs: rows `row0 + dy`
 * of `tile` (row_words a row), bytes from `at0 + dx` on; at0 is a multiple
 * of 4. A run's windows are the words of its row shifted by whole bytes
 * (__byte_perm). Rect3, the 3x3 rectangle (the motion detector's default):
 * the runs are known at compile time, so the shifts are constants and the
 * three words of each row are read once; the generic loops cost about four
 * times its instructions (a pass took as long as both passes fused). */
template <bool Dilate, bool Binary, bool Rect3>
__device__ __forceinline__ uint32_t over_element(const uint32_t *tile, int row_words, int row0,
                                                 int at0, const fm_morph_element &element)
{
    uint32_t acc = Dilate ? 0u : 0xffffffffu;
    if constexpr (Rect3) {
        const int w = at0 >> 2;
#pragma unroll
        for (int dy = -1; dy <= 1; ++dy) {
            const uint32_t *row = tile + (row0 + dy) * row_words;
            const uint32_t left = row[w - 1], mid = row[w], right = row[w + 1];
            acc = pick4<Dilate, Binary>(acc, __byte_perm(left, mid, 0x6543));
            acc = pick4<Dilate, Binary>(acc, mid);
            acc = pick4<Dilate, Binary>(acc, __byte_perm(mid, right, 0x4321));
        }
    }
    else {
        for (int r = 0; r < element.n_runs; ++r) {
            const uint32_t *row = tile + (row0 + element.dy[r]) * row_words;
            const int first = at0 + element.dx[r];
            for (int i = 0; i < element.len[r]; ++i) {
                const int at = first + i;
                acc = pick4<Dilate, Binary>(
                    acc, __byte_perm(row[at >> 2], row[(at >> 2) + 1], 0x3210 + 0x1111 * (at & 3)));
            }
        }
    }
    return acc;
}

/* A block's tile of `rows` x `row_words` words of the image from pixel
 * (x0, y0) on: the neutral value outside the image (load4). Unrolled: a
 * thread's loads are in flight together, not one by one. */
template <bool Dilate>
__device__ __forceinline__ void load_tile(uint32_t *tile, int rows, int row_words, int x0, int y0,
                                          const unsigned char *src, size_t src_pitch, int width,
                                          int height, int binarize, int aligned)
{
    const int threads = (int)(blockDim.x * blockDim.y);
#pragma unroll 4
    for (int i = (int)(threadIdx.y * blockDim.x + threadIdx.x); i < rows * row_words;
         i += threads) {
        const int t = i / row_words, y = y0 + t;
        tile[i] = y >= 0 && y < height
                      ? load4<Dilate>(src + (size_t)y * src_pitch, x0 + 4 * (i - t * row_words),
                                      width, binarize, aligned != 0)
                      : (Dilate ? 0u : 0xffffffffu);
    }
}

/* The block's kTileW x kTileH pixels of dst: each thread a word in a
 * column of rows, over the element in `tile` (the tile's pixel (0, 0) at
 * row reach_y, word halo_words). */
template <bool Dilate, bool Binary, bool Rect3>
__device__ __forceinline__ void write_tile(const uint32_t *tile, int row_words, int reach_y,
                                           int halo_words, const fm_morph_element &element,
                                           unsigned char *dst, size_t dst_pitch, int width,
                                           int height, int aligned)
{
    const int x = (int)(blockIdx.x * kTileW + 4 * threadIdx.x);
    if (x >= width)
        return;
    for (int ly = (int)threadIdx.y; ly < kTileH; ly += (int)blockDim.y) {
        const int y = (int)(blockIdx.y * kTileH) + ly;
        if (y >= height)
            return;
        const uint32_t acc = over_element<Dilate, Binary, Rect3>(
            tile, row_words, ly + reach_y, 4 * (halo_words + (int)threadIdx.x), element);
        unsigned char *out = dst + (size_t)y * dst_pitch;
        if (aligned && x + 3 < width) {
            *reinterpret_cast<uint32_t *>(out + x) = acc;
        }
        else {
            for (int k = 0; k < 4 && x + k < width; ++k)
                out[x + k] = (unsigned char)(acc >> (8 * k));
        }
    }
}

/* One pass. The halo is the element's reach rounded up to whole words, not
 * the largest element's: a 3x3 element loads about 1.2 bytes per output
 * byte. The image set is read where the launch put it (__grid_constant__),
 * not copied. */
template <bool Dilate, bool Binary, int N, bool Rect3>
__global__ void morphology_kernel(const __grid_constant__ image_set<N> set, int width,
                                  int height, fm_morph_element element, int reach_y,
                                  int halo_words, int binarize, int aligned)
{
    extern __shared__ uint32_t tile[];
    const int z = (int)blockIdx.z, row_words = kTileW / 4 + 2 * halo_words;
    load_tile<Dilate>(tile, kTileH + 2 * reach_y, row_words,
                      (int)blockIdx.x * kTileW - 4 * halo_words,
                      (int)blockIdx.y * kTileH - reach_y, set.src[z], set.src_pitch[z], width,
                      height, binarize, aligned);
    __syncthreads();
    write_tile<Dilate, Binary, Rect3>(tile, row_words, reach_y, halo_words, element, set.dst[z],
                                      set.dst_pitch[z], width, height, aligned);
}

/* The opening (DilateFirst false) or closing of a tile in one block: the
 * input with the halo both passes reach, then the first pass over the tile
 * and the halo the second reads (pixels outside the image take the second
 * pass's neutral value, as a second launch would see them), then the
 * second pass. Tile coordinates as morphology_kernel's, the halo twice as
 * deep: the mask is read and written once, not twice. */
template <bool DilateFirst, bool Binary, int N, bool Rect3>
__global__ void morphology_pair_kernel(const __grid_constant__ image_set<N> set, int width,
                                       int height, fm_morph_element element, int reach_y,
                                       int halo_words, int binarize, int aligned)
{
    extern __shared__ uint32_t smem[];
    const int z = (int)blockIdx.z;
    const uint32_t second_neutral = DilateFirst ? 0xffffffffu : 0u;
    const int in_words = kTileW / 4 + 4 * halo_words, in_rows = kTileH + 4 * reach_y;
    const int mid_words = kTileW / 4 + 2 * halo_words, mid_rows = kTileH + 2 * reach_y;
    uint32_t *in = smem;                                /* + 1: the last window's word */
    uint32_t *mid = smem + in_rows * in_words + 1;
    const int x0 = (int)blockIdx.x * kTileW, y0 = (int)blockIdx.y * kTileH;
    load_tile<DilateFirst>(in, in_rows, in_words, x0 - 8 * halo_words, y0 - 2 * reach_y,
                           set.src[z], set.src_pitch[z], width, height, binarize, aligned);
    __syncthreads();
    for (int i = (int)(threadIdx.y * blockDim.x + threadIdx.x); i < mid_rows * mid_words;
         i += (int)(blockDim.x * blockDim.y)) {
        const int r = i / mid_words, w = i - r * mid_words;
        const int y = y0 - reach_y + r, x = x0 - 4 * halo_words + 4 * w;
        uint32_t acc = second_neutral;
        if (y >= 0 && y < height && x + 3 >= 0 && x < width) {
            acc = over_element<DilateFirst, Binary, Rect3>(in, in_words, r + reach_y,
                                                           4 * (w + halo_words), element);
            for (int b = 0; b < 4; ++b)
                if (x + b < 0 || x + b >= width)
                    acc = (acc & ~(0xffu << (8 * b))) | (second_neutral & (0xffu << (8 * b)));
        }
        mid[i] = acc;
    }
    __syncthreads();
    write_tile<!DilateFirst, Binary, Rect3>(mid, mid_words, reach_y, halo_words, element,
                                            set.dst[z], set.dst_pitch[z], width, height,
                                            aligned);
}

/* Bits 0 .. 3 back to 4 bytes, 0 or 255: times 1 + 2^7 + 2^14 + 2^21 puts
 * bit k at 8k (no carries, as in bits4). */
__device__ __forceinline__ uint32_t bytes4(uint32_t nibble)
{
    return ((nibble * 0x00204081u) & 0x01010101u) * 0xffu;
}

/* morphology_pair_kernel's result for the 3x3 rectangle, foreground where
 * src equals fg, in bits (pair3_bits, morphology_bits.h), written back as
 * bytes by lanes 1 to 30. Every src and dst row is 8-byte aligned (the
 * launcher's test). */
template <bool DilateFirst, int N>
__global__ void __launch_bounds__(32 * kBitWarps)
    morphology_pair_bits_kernel(const __grid_constant__ image_set<N> set, int width, int height,
                                int fg)
{
    const int z = (int)blockIdx.z, lane = (int)(threadIdx.x & 31);
    const int warp_x = (int)(blockIdx.x * kBitWarps + (threadIdx.x >> 5));
    if (warp_x * kBitWarpCols >= width)
        return; /* the whole warp: its shuffles need no lane that left */
    const int x0 = warp_x * kBitWarpCols - 8 + 8 * lane, y0 = (int)blockIdx.y * kBitRows;
    uint32_t out[kBitRows / 4];
    pair3_bits<DilateFirst>(set.src[z], set.src_pitch[z], width, height, fg, x0, y0, true, out);
    if (lane == 0 || lane == 31 || x0 >= width)
        return;
    unsigned char *dst = set.dst[z];
    const size_t dst_pitch = set.dst_pitch[z];
#pragma unroll
    for (int r = 0; r < kBitRows; ++r) {
        const int y = y0 + r;
        if (y >= height)
            return;
        unsigned char *row = dst + (size_t)y * dst_pitch;
        const uint32_t bits = band_row(out, r);
        if (x0 + 8 <= width) {
            *reinterpret_cast<uint2 *>(row + x0) =
                make_uint2(bytes4(bits & 0xfu), bytes4(bits >> 4 & 0xfu));
        }
        else {
#pragma unroll 1
            for (int k = 0; k < 8 && x0 + k < width; ++k)
                row[x0 + k] = (bits >> k & 1u) ? 255 : 0;
        }
    }
}

bool is_u8_plane(const fm_image &im)
{
    return im.data != nullptr && im.channels == 1 && im.elem_size == 1
           && (im.height == 1 || im.pitch >= (size_t)im.width);
}

bool word_aligned(const fm_image &im)
{
    return reinterpret_cast<uintptr_t>(im.data) % 4 == 0 && im.pitch % 4 == 0;
}

/* Whether every row starts 8-byte aligned: morphology_pair_bits_kernel's
 * loads and stores. */
bool uint2_aligned(const fm_image &im)
{
    return reinterpret_cast<uintptr_t>(im.data) % 8 == 0 && im.pitch % 8 == 0;
}

/* Whether the element is the 3x3 rectangle: three runs of 3 from column -1,
 * in rows -1, 0 and 1. */
bool is_rect3(const fm_morph_element &e)
{
    if (e.n_runs != 3)
        return false;
    for (int r = 0; r < 3; ++r)
        if (e.dy[r] != r - 1 || e.dx[r] != -1 || e.len[r] != 3)
            return false;
    return true;
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

/* Queues one pass over `count` (<= N) images, or with Pair both passes of
 * an opening (Dilate false) or closing. */
template <bool Dilate, bool Binary, int N, bool Pair>
cudaError_t launch_set(const fm_image *src, const fm_image *dst, int count,
                       const fm_morph_element &element, int reach_x, int reach_y,
                       int binarize, cudaStream_t stream)
{
    image_set<N> set = {};
    int aligned = 1;
    bool aligned8 = true;
    for (int k = 0; k < count; ++k) {
        set.src[k] = static_cast<const unsigned char *>(src[k].data);
        set.dst[k] = static_cast<unsigned char *>(dst[k].data);
        set.src_pitch[k] = src[k].pitch;
        set.dst_pitch[k] = dst[k].pitch;
        aligned &= word_aligned(src[k]) && word_aligned(dst[k]);
        aligned8 = aligned8 && uint2_aligned(src[k]) && uint2_aligned(dst[k]);
    }
    const int width = src[0].width, height = src[0].height, halo_words = (reach_x + 3) / 4;
    const bool rect3 = is_rect3(element);
    /* The 3x3 opening or closing of a binary mask: on bits. Binary input
     * bytes are 0 and 255, so foreground is 255 there. */
    if constexpr (Pair && Binary) {
        if (rect3 && aligned8 && fm_div_up((unsigned)height, kBitRows) <= 65535u) {
            const dim3 grid(fm_div_up((unsigned)width, kBitWarps * kBitWarpCols),
                            fm_div_up((unsigned)height, kBitRows), (unsigned)count);
            morphology_pair_bits_kernel<Dilate, N><<<grid, 32 * kBitWarps, 0, stream>>>(
                set, width, height, binarize >= 0 ? binarize : 255);
            return cudaGetLastError();
        }
    }
    const dim3 grid(fm_div_up((unsigned)width, kTileW), fm_div_up((unsigned)height, kTileH),
                    (unsigned)count);
    /* at most (32 + 30) x (32 + 8) words, and one the last window reads past */
    const size_t shared =
        ((size_t)(kTileH + 2 * reach_y) * (size_t)(kTileW / 4 + 2 * halo_words) + 1) * 4;
    if constexpr (Pair) {
        /* the input's tile with twice the halo, then the first pass's */
        const size_t input =
            ((size_t)(kTileH + 4 * reach_y) * (size_t)(kTileW / 4 + 4 * halo_words) + 1) * 4;
        auto kernel = rect3 ? morphology_pair_kernel<Dilate, Binary, N, true>
                            : morphology_pair_kernel<Dilate, Binary, N, false>;
        kernel<<<grid, kBlock, input + shared, stream>>>(set, width, height, element, reach_y,
                                                         halo_words, binarize, aligned);
    }
    else {
        auto kernel = rect3 ? morphology_kernel<Dilate, Binary, N, true>
                            : morphology_kernel<Dilate, Binary, N, false>;
        kernel<<<grid, kBlock, shared, stream>>>(set, width, height, element, reach_y,
                                                 halo_words, binarize, aligned);
    }
    return cudaGetLastError();
}

template <int N, bool Pair>
cudaError_t launch_any(const fm_image *src, const fm_image *dst, int count,
                       const fm_morph_element &element, int reach_x, int reach_y, int dilate,
                       int binarize, int binary, cudaStream_t stream)
{
    if (dilate)
        return binary ? launch_set<true, true, N, Pair>(src, dst, count, element, reach_x,
                                                        reach_y, binarize, stream)
                      : launch_set<true, false, N, Pair>(src, dst, count, element, reach_x,
                                                         reach_y, binarize, stream);
    return binary ? launch_set<false, true, N, Pair>(src, dst, count, element, reach_x, reach_y,
                                                     binarize, stream)
                  : launch_set<false, false, N, Pair>(src, dst, count, element, reach_x,
                                                      reach_y, binarize, stream);
}

/* Checks what both launchers take; the element's reach. */
bool valid_call(const fm_image *src, const fm_image *dst, int count,
                const fm_morph_element *element, int binarize, int *reach_x, int *reach_y)
{
    if (src == nullptr || dst == nullptr || count < 1 || element == nullptr
        || !runs_fit(*element, reach_x, reach_y) || binarize > 255 || src[0].width <= 0
        || src[0].height <= 0 || fm_div_up((unsigned)src[0].height, kTileH) > 65535u)
        return false;
    for (int k = 0; k < count; ++k)
        if (!is_u8_plane(src[k]) || !is_u8_plane(dst[k]) || src[k].width != src[0].width
            || src[k].height != src[0].height || dst[k].width != src[0].width
            || dst[k].height != src[0].height)
            return false;
    return true;
}

/* One launch per set of kSetMax images (one image: the small parameter block). */
template <bool Pair>
cudaError_t launch_all(const fm_image *src, const fm_image *dst, int count,
                       const fm_morph_element &element, int reach_x, int reach_y, int dilate,
                       int binarize, int binary, cudaStream_t stream)
{
    binary = binary || binarize >= 0;
    if (count == 1)
        return launch_any<1, Pair>(src, dst, 1, element, reach_x, reach_y, dilate, binarize,
                                   binary, stream);
    for (int first = 0; first < count; first += kSetMax) {
        cudaError_t err = launch_any<kSetMax, Pair>(src + first, dst + first,
                                                    min(kSetMax, count - first), element,
                                                    reach_x, reach_y, dilate, binarize, binary,
                                                    stream);
        if (err != cudaSuccess)
            return err;
    }
    return cudaSuccess;
}

}  // namespace

extern "C" cudaError_t fm_launch_morphology(const fm_image *src, const fm_image *dst, int count,
                                            const fm_morph_element *element, int dilate,
                                            int binarize, int binary, cudaStream_t stream)
{
    int reach_x, reach_y;
    if (!valid_call(src, dst, count, element, binarize, &reach_x, &reach_y))
        return cudaErrorInvalidValue;
    return launch_all<false>(src, dst, count, *element, reach_x, reach_y, dilate, binarize,
                             binary, stream);
}

extern "C" int fm_morphology_pair_fits(const fm_morph_element *element)
{
    int reach_x, reach_y;
    return element != nullptr && runs_fit(*element, &reach_x, &reach_y)
           && reach_x <= FM_MORPH_PAIR_MAX_REACH && reach_y <= FM_MORPH_PAIR_MAX_REACH;
}

extern "C" cudaError_t fm_launch_morphology_pair(const fm_image *src, const fm_image *dst,
                                                 int count, const fm_morph_element *element,
                                                 int dilate_first, int binarize, int binary,
                                                 cudaStream_t stream)
{
    int reach_x, reach_y;
    if (!valid_call(src, dst, count, element, binarize, &reach_x, &reach_y)
        || !fm_morphology_pair_fits(element))
        return cudaErrorInvalidValue;
    return launch_all<true>(src, dst, count, *element, reach_x, reach_y, dilate_first,
                            binarize, binary, stream);
}
