/*
 * nv12_loop.h - host (CPU) reference of NV12/NV21 -> BGR/RGB, bit-exact with
 * cv2.cvtColor(..., COLOR_YUV2BGR_NV12) and its siblings.  Plain C11, no
 * Python API; the per-pixel maths is cuda/nv12_pixel.h, shared with the GPU.
 */
#ifndef FASTMOG_NV12_LOOP_H
#define FASTMOG_NV12_LOOP_H

#include <stddef.h>
#include "../cuda/nv12_pixel.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FM_YUV_OK 0
#define FM_YUV_EINVAL (-1)

/*
 * Converts one frame.
 *   y:   height rows of width luma bytes, rows y_pitch bytes apart.
 *   uv:  height/2 rows of width bytes (width/2 interleaved chroma pairs),
 *        rows uv_pitch bytes apart.  May lie anywhere, e.g. right after y.
 *   out: height rows of width*3 bytes, rows out_pitch bytes apart; must not
 *        overlap y or uv.
 *   width, height: even and > 0, as OpenCV requires.
 *   matrix: an FM_YUV_MATRIX_* id; flags: FM_YUV_RGB | FM_YUV_NV21.
 * Returns FM_YUV_OK, or FM_YUV_EINVAL (odd or empty sizes, pitches shorter
 * than a row, unknown matrix or flags) having written nothing.
 */
int fm_nv12_to_bgr_cpu(const unsigned char *y, size_t y_pitch,
                       const unsigned char *uv, size_t uv_pitch,
                       unsigned char *out, size_t out_pitch,
                       int width, int height, int matrix, int flags);

#ifdef __cplusplus
}
#endif

#endif /* FASTMOG_NV12_LOOP_H */
