/* The 3x3 opening or closing of a mask made binary, computed on bits in a
 * warp's registers: what cuda/morphology.cu writes out as bytes and
 * cuda/components.cu turns straight into the labelling's cells. Device
 * code, included by .cu files only. */
#ifndef FASTMOG_CUDA_MORPHOLOGY_BITS_H
#define FASTMOG_CUDA_MORPHOLOGY_BITS_H

#include <stddef.h>
#include <stdint.h>

namespace {

/* A 3x3 window over 8 pixels is a few ANDs, ORs and shifts of an 8-bit
 * word, not byte work in shared memory; the mask is read once, and a warp
 * needs no shared memory or barrier. A warp takes a band of kBitRows rows
 * and kBitWarpCols columns; each lane 8 consecutive pixels of each row
 * (one 8-byte load), lanes 0 and 31 the halo the two passes reach (2
 * pixels each way, less than a lane's 8): their results are not the
 * band's. Bit i of a lane's word is its pixel x0 + i. The band is small so
 * that there are many warps: the loads are all there is to wait for, and
 * only enough warps in flight hide their latency (with 16 pixels a lane
 * and 16 rows a warp, a 3840x2160 mask made 1080 warps, 0.41 waves and
 * 5.5 % occupancy on an H200, and took 22.8 us); 8 pixels a lane and 8
 * rows a warp make 4320 warps, a quarter of the work each. */
constexpr int kBitRows = 8;
constexpr int kBitWarpCols = 30 * 8;
constexpr int kBitWarps = 4;

/* A band's rows are held packed: a lane's 8 pixels of 4 consecutive rows
 * in one word, a byte a row (the first row in byte 0), bit i of a byte its
 * pixel x0 + i. One shuffle then moves 4 rows, and one logic instruction
 * combines them. */

/* Bytes whose top bit is set exactly where `x`'s byte is 0: adding 0x7f to
 * a byte's low 7 bits sets its top bit unless they are all 0 (no carry
 * leaves the byte), and the byte's own top bit is ORed in. */
__device__ __forceinline__ uint32_t zero_bytes(uint32_t x)
{
    return ~(((x & 0x7f7f7f7fu) + 0x7f7f7f7fu) | x) & 0x80808080u;
}

/* A row's 8 pixels from one 8-byte load as 8 bits: 1 where the byte
 * equals fg (fg4, fg in every byte). The first 4 pixels' flags go to bits
 * 0, 8, 16 and 24, the last 4's to 4, 12, 20 and 28; times
 * 1 + 2^7 + 2^14 + 2^21 puts pixel i at bit 21 + i, and no two partial
 * products share a bit, so nothing carries. */
__device__ __forceinline__ uint32_t bits8(uint2 v, uint32_t fg4)
{
    const uint32_t flags = zero_bytes(v.x ^ fg4) >> 7 | zero_bytes(v.y ^ fg4) >> 3;
    return (flags * 0x00204081u) >> 21 & 0xffu;
}

/* Each pixel's AND (erosion) or OR over itself and its left and right
 * neighbours, 4 rows at once; those of bits 0 and 7 are the neighbouring
 * lanes' bits 7 and 0. Lanes 0 and 31 get their own word for the missing
 * neighbour: a wrong bit 0 (lane 31: bit 7), which spreads a pixel a pass,
 * so after both passes bits 0 and 1 (6 and 7), never as far as the bit 7
 * (bit 0) that lane 1 (lane 30) reads. */
template <bool Dilate>
__device__ __forceinline__ uint32_t across3(uint32_t rows)
{
    const uint32_t left = __shfl_up_sync(0xffffffffu, rows, 1);
    const uint32_t right = __shfl_down_sync(0xffffffffu, rows, 1);
    /* pixel i - 1 at bit i, and pixel i + 1 */
    const uint32_t west = (rows << 1 & 0xfefefefeu) | (left >> 7 & 0x01010101u);
    const uint32_t east = (rows >> 1 & 0x7f7f7f7fu) | (right << 7 & 0x80808080u);
    return Dilate ? (west | rows | east) : (west & rows & east);
}

/* Rows r .. r + 3, each the AND (OR) of itself and the two rows below it,
 * from rows r .. r + 3 (`rows`) and r + 4 .. r + 7 (`next`; only its first
 * two rows are read). */
template <bool Dilate>
__device__ __forceinline__ uint32_t down3(uint32_t rows, uint32_t next)
{
    const uint32_t one = __funnelshift_r(rows, next, 8), two = __funnelshift_r(rows, next, 16);
    return Dilate ? (rows | one | two) : (rows & one & two);
}

/* A byte of 0xff for each of rows y .. y + 3 inside 0 .. height - 1. */
__device__ __forceinline__ uint32_t rows_inside(int y, int height)
{
    uint32_t m = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j)
        m |= y + j >= 0 && y + j < height ? 0xffu << 8 * j : 0u;
    return m;
}

/* The opening (DilateFirst false) or closing by the 3x3 rectangle of the
 * pixels of src (W x H) equal to fg, for this lane's pixels x0 .. x0 + 7
 * of rows y0 .. y0 + kBitRows - 1, packed: out[0] rows y0 .. y0 + 3,
 * out[1] the next 4. Right for lanes 1 to 30 and pixels inside the image
 * (others are for the caller to drop). Every lane of the warp calls it,
 * lane l with x0 = the band's first column - 8 + 8 l. The input rows
 * y0 - 2 .. y0 + kBitRows + 1 are loaded first, all in flight together
 * (with `vectors`, every row 8-byte aligned, a lane wholly in the row
 * loads them as 8-byte words, rows outside the image clamped to it; others
 * byte by byte), with the first pass's neutral value outside the image;
 * the first pass's rows y0 - 1 .. y0 + kBitRows take the second pass's
 * outside it, as two launches through an image in between would. */
template <bool DilateFirst>
__device__ __forceinline__ void pair3_bits(const unsigned char *src, size_t src_pitch,
                                           int width, int height, int fg, int x0, int y0,
                                           bool vectors, uint32_t out[kBitRows / 4])
{
    static_assert(kBitRows == 8, "a band is two packed words");
    constexpr uint32_t first_neutral = DilateFirst ? 0u : 0xffffffffu;
    constexpr uint32_t second_neutral = DilateFirst ? 0xffffffffu : 0u;
    constexpr int in_rows = kBitRows + 4;
    const bool whole = vectors && x0 >= 0 && x0 + 8 <= width;
    /* a halo lane wholly left or right of the image: all its pixels take
     * the first pass's neutral value, with no loop over them */
    const bool off = x0 + 8 <= 0 || x0 >= width;
    /* a band away from the top and bottom needs no row clamps or masks
     * (the whole warp takes one side) */
    const bool edge = y0 < 2 || y0 + kBitRows + 2 > height;
    uint2 raw[in_rows];
    if (whole && !edge) {
        const unsigned char *first = src + (size_t)(y0 - 2) * src_pitch + x0;
#pragma unroll
        for (int r = 0; r < in_rows; ++r)
            raw[r] = __ldg(reinterpret_cast<const uint2 *>(first + r * src_pitch));
    }
    else if (whole) {
#pragma unroll
        for (int r = 0; r < in_rows; ++r) {
            const int y = min(max(y0 - 2 + r, 0), height - 1);
            raw[r] = __ldg(reinterpret_cast<const uint2 *>(src + (size_t)y * src_pitch + x0));
        }
    }
    /* Keeps the conversions after every load: without it ptxas for sm_100
     * converts the first 8 rows before it issues the last 4 loads. */
    __syncwarp();
    uint32_t in[in_rows / 4] = {0u, 0u, 0u};    /* rows y0 - 2 .. y0 + 9 */
    if (whole) {
        const uint32_t fg4 = 0x01010101u * (uint32_t)fg;
#pragma unroll
        for (int r = 0; r < in_rows; ++r)
            in[r / 4] |= bits8(raw[r], fg4) << 8 * (r % 4);
    }
    else if (off) {
#pragma unroll
        for (int w = 0; w < in_rows / 4; ++w)
            in[w] = first_neutral;
    }
    else {
#pragma unroll
        for (int r = 0; r < in_rows; ++r) {
            const int y = y0 - 2 + r;
            uint32_t bits = first_neutral & 0xffu;
            if (y >= 0 && y < height) {
                const unsigned char *row = src + (size_t)y * src_pitch;
#pragma unroll 1
                for (int k = 0; k < 8; ++k) {
                    const int x = x0 + k;
                    if (x >= 0 && x < width)
                        bits = (bits & ~(1u << k)) | (uint32_t)(row[x] == fg) << k;
                }
            }
            in[r / 4] |= bits << 8 * (r % 4);
        }
    }
    /* the lane's pixels inside the image, in every row: x0 is a multiple
     * of 8, so a lane starts either inside it or wholly left of it */
    const uint32_t inside =
        (x0 < 0 ? 0u : 0xffu >> (8 - min(max(width - x0, 0), 8))) * 0x01010101u;
    if (edge) {
#pragma unroll
        for (int w = 0; w < in_rows / 4; ++w) {
            const uint32_t keep = rows_inside(y0 - 2 + 4 * w, height);
            in[w] = (in[w] & keep) | (first_neutral & ~keep);
        }
    }
#pragma unroll
    for (int w = 0; w < in_rows / 4; ++w)
        in[w] = across3<DilateFirst>(in[w]);
    /* the first pass's rows y0 - 1 .. y0 + 8 (the last word's first two) */
    uint32_t mid[3] = {down3<DilateFirst>(in[0], in[1]), down3<DilateFirst>(in[1], in[2]),
                       down3<DilateFirst>(in[2], 0u)};
#pragma unroll
    for (int w = 0; w < 3; ++w) {
        const uint32_t keep = edge ? inside & rows_inside(y0 - 1 + 4 * w, height) : inside;
        mid[w] = (mid[w] & keep) | (second_neutral & ~keep);
        mid[w] = across3<!DilateFirst>(mid[w]);
    }
    out[0] = down3<!DilateFirst>(mid[0], mid[1]);
    out[1] = down3<!DilateFirst>(mid[1], mid[2]);
}

/* Row r (0 to 7) of a band's packed rows, 8 bits. */
__device__ __forceinline__ uint32_t band_row(const uint32_t out[kBitRows / 4], int r)
{
    return out[r / 4] >> 8 * (r % 4) & 0xffu;
}

}  // namespace

#endif /* FASTMOG_CUDA_MORPHOLOGY_BITS_H */
