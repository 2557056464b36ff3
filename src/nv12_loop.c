/*
 * nv12_loop.c - host loop over cuda/nv12_pixel.h.  See nv12_loop.h.
 */
#include "nv12_loop.h"

int fm_nv12_to_bgr_cpu(const unsigned char *y, size_t y_pitch,
                       const unsigned char *uv, size_t uv_pitch,
                       unsigned char *out, size_t out_pitch,
                       int width, int height, int matrix, int flags)
{
    fm_yuv_matrix m;
    int row, x;

    if (y == NULL || uv == NULL || out == NULL || width <= 0 || height <= 0
        || width % 2 != 0 || height % 2 != 0 || (flags & ~FM_YUV_FLAGS_ALL) != 0
        || fm_yuv_matrix_get(matrix, &m) != 0)
        return FM_YUV_EINVAL;
    /* rows must not overlap; the chroma pitch only matters past one row */
    if (y_pitch < (size_t)width || out_pitch < (size_t)width * 3
        || (height > 2 && uv_pitch < (size_t)width))
        return FM_YUV_EINVAL;

    /* Two luma rows per chroma row: each chroma pair is read once and its
     * terms serve the 2x2 block it belongs to. */
    for (row = 0; row < height; row += 2) {
        /* restrict: out must not overlap the planes (checked by callers), so
         * the compiler need not reload inputs after every byte stored */
        const unsigned char *restrict y0 = y + (size_t)row * y_pitch;
        const unsigned char *restrict y1 = y0 + y_pitch;
        const unsigned char *restrict c = uv + (size_t)(row / 2) * uv_pitch;
        unsigned char *restrict o0 = out + (size_t)row * out_pitch;
        unsigned char *restrict o1 = o0 + out_pitch;
        for (x = 0; x < width; x += 2) {
            const fm_yuv_chroma terms = fm_yuv_chroma_terms(&m, c[x], c[x + 1], flags);
            fm_yuv_pixel(&m, &terms, y0[x], o0 + (size_t)x * 3);
            fm_yuv_pixel(&m, &terms, y0[x + 1], o0 + (size_t)x * 3 + 3);
            fm_yuv_pixel(&m, &terms, y1[x], o1 + (size_t)x * 3);
            fm_yuv_pixel(&m, &terms, y1[x + 1], o1 + (size_t)x * 3 + 3);
        }
    }
    return FM_YUV_OK;
}
