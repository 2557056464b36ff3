/*
 * nv12_pixel.h - YUV 4:2:0 (NV12/NV21) to BGR/RGB of one pixel in OpenCV's
 * integer fixed-point arithmetic, shared by the host C code (src/nv12_loop.c)
 * and the CUDA kernel (cuda/nv12.cu).
 *
 * Goal: bit-exact agreement with cv2.cvtColor(..., COLOR_YUV2BGR_NV12) and
 * its RGB / NV21 siblings.  The maths is integer only, so host and device
 * agree without any compiler flag.
 *
 * Per output channel, with y' = max(0, Y - 16), u = U - 128, v = V - 128:
 *     acc = cy*y' + cu*u + cv*v + 2^19        (int32, never overflows)
 *     out = clamp(acc >> 20, 0, 255)
 * How the constants were established: for each coefficient, every cv2 output
 * of a one-dimensional sweep (Y alone, then Y with U, then Y with V) bounds
 * the integer that can produce it; the candidates left were then run over all
 * 2^24 (Y, U, V) triples against cv2 (OpenCV 5.0.0) and exactly one tuple
 * matched everywhere: the one below.  They are BT.601's "video range"
 * (Y in 16..235) coefficients to three decimals - 1.164, 2.018, -0.391,
 * -0.813, 1.596 - times 2^20, truncated towards zero.  Luma below 16 is
 * clamped to black before scaling (so Y = 0..16 give identical results).
 * tests/video/test_nv12.py checks all 2^24 triples in every flag combination.
 *
 * Chroma is not interpolated: each U, V pair serves its 2x2 luma block, as in
 * OpenCV.  The chroma terms are therefore computed once per block
 * (fm_yuv_chroma_terms) and applied to four luma samples (fm_yuv_pixel).
 */
#ifndef FASTMOG_NV12_PIXEL_H
#define FASTMOG_NV12_PIXEL_H

#include <string.h>

#include "nv12_flags.h"

#ifndef FM_HOST_DEVICE
#ifdef __CUDACC__
#define FM_HOST_DEVICE __host__ __device__
#else
#define FM_HOST_DEVICE
#endif
#endif

#define FM_YUV_SHIFT 20
#define FM_YUV_ROUND (1 << (FM_YUV_SHIFT - 1))

typedef struct fm_yuv_matrix {
    int y_black;            /* luma of black; lower values are clamped to it */
    int cy;                 /* luma gain, all three channels */
    int cub;                /* U into blue */
    int cug, cvg;           /* U and V into green */
    int cvr;                /* V into red */
} fm_yuv_matrix;

/* Host only: fills *m for matrix `id`; 0, or -1 for an unknown id. */
static inline int fm_yuv_matrix_get(int id, fm_yuv_matrix *m)
{
    switch (id) {
    case FM_YUV_MATRIX_BT601:
        m->y_black = 16;
        m->cy = 1220542;
        m->cub = 2116026;
        m->cug = -409993;
        m->cvg = -852492;
        m->cvr = 1673527;
        return 0;
    default:
        return -1;
    }
}

/* The chroma part of one 2x2 block, already in output order and with the
 * rounding constant folded in: first = blue (red with FM_YUV_RGB). */
typedef struct fm_yuv_chroma {
    int first, green, last;
} fm_yuv_chroma;

/* c0, c1: the block's two chroma bytes as stored (U, V; or V, U with
 * FM_YUV_NV21). */
FM_HOST_DEVICE static inline fm_yuv_chroma
fm_yuv_chroma_terms(const fm_yuv_matrix *m, int c0, int c1, int flags)
{
    const int u = ((flags & FM_YUV_NV21) ? c1 : c0) - 128;
    const int v = ((flags & FM_YUV_NV21) ? c0 : c1) - 128;
    const int blue = FM_YUV_ROUND + m->cub * u;
    const int red = FM_YUV_ROUND + m->cvr * v;
    fm_yuv_chroma c;
    c.green = FM_YUV_ROUND + m->cug * u + m->cvg * v;
    c.first = (flags & FM_YUV_RGB) ? red : blue;
    c.last = (flags & FM_YUV_RGB) ? blue : red;
    return c;
}

/* acc >> 20 clamped to 0..255.  Negative sums go to 0 before the shift, so
 * no right shift of a negative int (implementation-defined in C) happens.
 * Two selects, no early return: compiles branch-free on host and device. */
FM_HOST_DEVICE static inline unsigned char fm_yuv_descale(int acc)
{
    acc = (acc < 0 ? 0 : acc) >> FM_YUV_SHIFT;
    return (unsigned char)(acc > 255 ? 255 : acc);
}

/* One pixel: luma sample y (0..255) with its block's chroma terms; writes
 * three bytes in output order. */
FM_HOST_DEVICE static inline void fm_yuv_pixel(const fm_yuv_matrix *m,
                                               const fm_yuv_chroma *c, int y,
                                               unsigned char *out)
{
    const int yd = y - m->y_black;
    const int luma = (yd > 0 ? yd : 0) * m->cy;
    out[0] = fm_yuv_descale(luma + c->first);
    out[1] = fm_yuv_descale(luma + c->green);
    out[2] = fm_yuv_descale(luma + c->last);
}

#endif /* FASTMOG_NV12_PIXEL_H */
