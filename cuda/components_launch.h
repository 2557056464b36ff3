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

/* One region as the host reads it, in 24 bytes, so that the header and 40
 * rows come back in under 1000 bytes: OpenCV's CC_STAT_LEFT,
 * TOP, WIDTH and HEIGHT (16 bits: the mask is at most 65535 pixels wide and
 * high) and AREA, then its pixels' x and y coordinates summed, 48 bits each
 * (a sum stays below 65535 * 2^30), low half-word first. The centroid is each
 * sum over the area, divided on the host in double as OpenCV divides. */
typedef struct fm_cc_row {
    uint16_t x, y, width, height;
    uint32_t area;
    uint16_t sum_x[3], sum_y[3];
} fm_cc_row;

/* The output's first slot, a row's size: how many regions were found, how
 * many of them are kept (at least min_area pixels) and how many pixels all
 * of them hold (a zone's score); the kept rows follow. */
typedef struct fm_cc_header {
    int32_t regions, kept;
    uint64_t pixels;
    int32_t unused[2];
} fm_cc_header;

/* The largest mask side the rows can hold. */
#define FM_CC_MAX_SIDE 65535

/* Row slots after the header that a stack of `images` images takes for each
 * image's foreground count (one uint64 each); none for one image. */
static inline size_t fm_cc_count_slots(int images)
{
    return images > 1 ? ((size_t)images * 8 + sizeof(fm_cc_row) - 1) / sizeof(fm_cc_row) : 0;
}

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
 * pixel), with `connectivity` 4 or 8. In OpenCV's order, one row per
 * region of at least `min_area` pixels: the header, the count slots
 * (fm_cc_count_slots(images)) and the first `read_rows` rows (zero rows
 * after the last region: what the host reads before it knows the count)
 * are written straight to `host`, page-locked host memory from
 * cudaHostAlloc (not write-combined: the device reaches it at the same
 * address), and the rows from read_rows on to `out`'s rows (device
 * memory: a header, the count slots, then fm_cc_max_regions rows; its
 * header is the passes' scratch). With `labels` (W x H int32; data NULL:
 * none), each pixel's kept region number from 1, 0 elsewhere, as OpenCV's
 * label image.
 *
 * images > 1: the mask is a stack of that many images of H / images rows
 * (an even number), one camera's each: no region crosses from one to the
 * next, so the rows come image by image, each image's in its own OpenCV
 * order (their y counted from the top of the stack); each image's
 * foreground count goes to the count slots. No labels then.
 *
 * `work` is fm_cc_work_bytes of device memory, 256-byte aligned.
 * (W + 1) * (H + 1) below 2^30, W and H at most FM_CC_MAX_SIDE.
 */
cudaError_t fm_launch_components(fm_image mask, unsigned char foreground, fm_image zone,
                                 int connectivity, long long min_area, int images, void *work,
                                 void *out, void *host, size_t read_rows, fm_image labels,
                                 cudaStream_t stream);

/*
 * fm_launch_components of the 3x3 opening (close = 0) or closing (close =
 * 1) of the pixels of `mask` equal to `foreground`, with 8-connectivity,
 * no zone, one image: the regions of what fm_launch_morphology_pair gives
 * for that element with binarize = foreground, without the opened mask
 * ever being written (the opening's bits become the labelling's cells in
 * its first pass).
 */
cudaError_t fm_launch_components_opened(fm_image mask, unsigned char foreground, int close,
                                        long long min_area, void *work, void *out, void *host,
                                        size_t read_rows, fm_image labels,
                                        cudaStream_t stream);

/*
 * Counts the pixels of `mask` equal to `foreground` (and nonzero in `zone`,
 * as above) into the header's `pixels`, its other fields zero: a region
 * step that needs only a zone's score. `out` is a header's worth of device
 * memory. W and H at most FM_CC_MAX_SIDE.
 */
cudaError_t fm_launch_count_foreground(fm_image mask, unsigned char foreground, fm_image zone,
                                       void *out, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* FASTMOG_CUDA_COMPONENTS_LAUNCH_H */
