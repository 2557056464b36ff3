/*
 * components_loop.h - host (CPU) reference of connected-component labelling
 * with statistics, equal to cv2.connectedComponentsWithStats(mask ==
 * foreground, connectivity=..., ltype=CV_32S) without its background row:
 * the same regions in the same order, the same boxes, areas and centroids.
 * Plain C11, no Python API.
 */
#ifndef FASTMOG_COMPONENTS_LOOP_H
#define FASTMOG_COMPONENTS_LOOP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FM_CC_OK 0
#define FM_CC_EINVAL (-1)
#define FM_CC_ENOMEM (-2)

/* One region: OpenCV's CC_STAT_LEFT, TOP, WIDTH, HEIGHT, AREA and centroid. */
typedef struct fm_component {
    int32_t x, y, width, height, area;
    double cx, cy;
} fm_component;

/*
 * Labels the pixels of `mask` equal to `foreground` (height rows of width
 * bytes, mask_pitch apart) with `connectivity` 4 or 8.
 *   labels: height rows of width int32 (labels_pitch bytes apart, a multiple
 *     of 4), used as working memory; on return 0 for the background and for
 *     regions smaller than min_area, else the region's number, 1..count.
 *   width * height must be below 2^31.
 * Regions are numbered as OpenCV numbers them: with 8-connectivity (its
 * block-based scan) by the first 2x2 block, in raster order of blocks, that
 * holds one of their pixels; with 4-connectivity by their first pixel in
 * raster order. Those with fewer than min_area pixels are dropped and the
 * others renumbered in that order.
 * *components gets a malloc'd array of *count regions (NULL when there are
 * none), which the caller frees. Returns FM_CC_OK, FM_CC_EINVAL having
 * written nothing, or FM_CC_ENOMEM.
 */
int fm_components_cpu(const unsigned char *mask, size_t mask_pitch, int width, int height,
                      unsigned char foreground, int connectivity, int64_t min_area,
                      int32_t *labels, size_t labels_pitch,
                      fm_component **components, int *count);

#ifdef __cplusplus
}
#endif

#endif /* FASTMOG_COMPONENTS_LOOP_H */
