/*
 * morphology_loop.h - host (CPU) reference of erosion, dilation, opening and
 * closing of a uint8 image by a structuring element, bit-exact with
 * cv2.morphologyEx (default anchor, the element's centre; constant border of
 * the neutral value: 255 for erosion, 0 for dilation). Plain C11, no Python
 * API.
 */
#ifndef FASTMOG_MORPHOLOGY_LOOP_H
#define FASTMOG_MORPHOLOGY_LOOP_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { FM_MORPH_ERODE = 0, FM_MORPH_DILATE = 1, FM_MORPH_OPEN = 2, FM_MORPH_CLOSE = 3 };

#define FM_MORPH_OK 0
#define FM_MORPH_EINVAL (-1)
#define FM_MORPH_ENOMEM (-2)

/*
 * dst = op(src) applied `iterations` times (opening: `iterations` erosions,
 * then as many dilations; closing the other way round, as OpenCV does).
 *   src, dst: height rows of width bytes, rows *_pitch bytes apart; dst must
 *     not overlap src.
 *   element: kh rows of kw bytes (row-major, no padding); nonzero = in. Its
 *     anchor is (kw / 2, kh / 2). At least one entry must be nonzero.
 *   scratch: height rows of width bytes (scratch_pitch apart), overlapping
 *     neither, when more than one pass is made (iterations > 1, or opening
 *     and closing); may be NULL otherwise.
 * Returns FM_MORPH_OK, FM_MORPH_EINVAL (bad sizes, op, pitches, or a
 * missing scratch) having written nothing, or FM_MORPH_ENOMEM.
 */
int fm_morphology_cpu(const unsigned char *src, size_t src_pitch,
                      unsigned char *dst, size_t dst_pitch,
                      unsigned char *scratch, size_t scratch_pitch,
                      int width, int height,
                      const unsigned char *element, int kw, int kh,
                      int op, int iterations);

#ifdef __cplusplus
}
#endif

#endif /* FASTMOG_MORPHOLOGY_LOOP_H */
