/* The C boundary of cuda/components.cu: connected-component labelling of a
 * uint8 mask on the GPU with each region's statistics, numbered as
 * cv2.connectedComponentsWithStats numbers them (src/components_loop.h says
 * how), the small regions dropped.
 *
 * Compiles as C. The launcher only queues work: it returns the first failed
 * launch's cudaError_t, takes the stream last, and never synchronizes,
 * prints or exits. */
#ifndef FASTMOG_CUDA_COMPONENTS_LAUNCH_H
#define FASTMOG_CUDA_COMPONENTS_LAUNCH_H

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime_api.h>

#include "image.h"

/* One region as the host reads it: OpenCV's CC_STAT_LEFT, TOP, WIDTH,
 * HEIGHT and AREA, and its pixels' coordinates summed (the centroid is each
 * sum over the area, divided on the host in double as OpenCV divides). */
typedef struct fm_cc_row {
    int32_t x, y, width, height, area, unused;
    uint64_t sum_x, sum_y;
} fm_cc_row;

/* The output's first slot, a row's size: how many regions were found, how
 * many of them are kept (at least min_area pixels) and how many pixels all
 * of them hold (a zone's score); the kept rows follow. */
typedef struct fm_cc_header {
    int32_t regions, kept;
    uint64_t pixels;
    int32_t unused[6];
} fm_cc_header;

#ifdef __cplusplus
extern "C" {
#endif

/* The most regions a width x height mask can hold with `connectivity` (one
 * per 2x2 block with 8, a checkerboard's half with 4): the output's rows. */
size_t fm_cc_max_regions(int width, int height, int connectivity);
/* Bytes of device scratch the launcher needs for such a mask. */
size_t fm_cc_work_bytes(int width, int height, int connectivity);

/*
 * Labels the pixels of `mask` (W x H, one channel, elem_size 1) equal to
 * `foreground`, and nonzero in `zone` (the same size; zone.data NULL: every
 * pixel), with `connectivity` 4 or 8 and writes to `out` (device memory: a
 * header, then fm_cc_max_regions rows) the header and, in OpenCV's order,
 * one row per region of at least `min_area` pixels. `work` is
 * fm_cc_work_bytes of device memory, 256-byte aligned. (W + 1) * (H + 1)
 * below 2^30, H at most 65535.
 */
cudaError_t fm_launch_components(fm_image mask, unsigned char foreground, fm_image zone,
                                 int connectivity, long long min_area, void *work, void *out,
                                 cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* FASTMOG_CUDA_COMPONENTS_LAUNCH_H */
