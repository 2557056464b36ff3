/* The C boundary of cuda/morphology.cu: one erosion or dilation of a uint8
 * image (or of many in one launch) on the GPU, bit-exact with cv2.erode /
 * cv2.dilate (default anchor, the element's centre; constant border of the
 * neutral value).
 *
 * Compiles as C. The launcher only queues work: it returns the launch's
 * cudaError_t, takes the stream last, and never synchronizes, prints or
 * exits. */
#ifndef FASTMOG_CUDA_MORPHOLOGY_LAUNCH_H
#define FASTMOG_CUDA_MORPHOLOGY_LAUNCH_H

#include <cuda_runtime_api.h>

#include "image.h"

/* The largest element side; an element reaches at most half of it each way. */
#define FM_MORPH_MAX_SIDE 31
/* The farthest an element reaches for the one-launch opening and closing
 * (elements up to 5x5): deeper halos would cost more than a second pass. */
#define FM_MORPH_PAIR_MAX_REACH 2
/* Runs of an element: at most (side + 1) / 2 in each of its rows. */
#define FM_MORPH_MAX_RUNS (FM_MORPH_MAX_SIDE * ((FM_MORPH_MAX_SIDE + 1) / 2))

/* A structuring element as its runs of consecutive nonzero entries, each
 * relative to the anchor: row dy, first column dx, `len` columns. Travels
 * as a kernel parameter (1.5 KB). */
typedef struct fm_morph_element {
    int n_runs;
    signed char dy[FM_MORPH_MAX_RUNS];
    signed char dx[FM_MORPH_MAX_RUNS];
    signed char len[FM_MORPH_MAX_RUNS];
} fm_morph_element;

#ifdef __cplusplus
extern "C" {
#endif

/*
 * dst[k] = erosion (dilate = 0: the minimum over the element) or dilation
 * (the maximum) of src[k] for each of `count` images (host arrays of
 * views, read before the call returns): many cameras' masks in one launch
 * (one per 32 images). Pixels outside an image count as 255 for an erosion
 * and 0 for a dilation, so they never decide. With binarize 0 to 255, src
 * is read as 255 where it equals that value and 0 elsewhere (a
 * subtractor's mask, shadows 127, made binary in the same pass); -1 reads
 * it as it is. binary != 0 says that src holds only 0 and 255 (a later
 * pass over a binarized mask): the minimum and maximum are then AND and
 * OR. Every view one channel, elem_size 1, the same W x H; no dst[k] may
 * overlap any src[j]. The element's runs must lie within
 * FM_MORPH_MAX_SIDE / 2 of the anchor.
 */
cudaError_t fm_launch_morphology(const fm_image *src, const fm_image *dst, int count,
                                 const fm_morph_element *element, int dilate, int binarize,
                                 int binary, cudaStream_t stream);

/* Whether fm_launch_morphology_pair takes this element: one whose runs
 * reach at most FM_MORPH_PAIR_MAX_REACH pixels from the anchor each way. */
int fm_morphology_pair_fits(const fm_morph_element *element);

/*
 * dst[k] = the opening (dilate_first = 0: erosion, then dilation) or the
 * closing (dilation, then erosion) of src[k] with the element, both passes
 * in one launch: exactly what two fm_launch_morphology calls give through
 * an intermediate image, whose pixels outside the image are the second
 * pass's neutral value. The rules of fm_launch_morphology; binarize applies
 * to the first pass. cudaErrorInvalidValue, nothing queued, for an element
 * that fm_morphology_pair_fits refuses.
 */
cudaError_t fm_launch_morphology_pair(const fm_image *src, const fm_image *dst, int count,
                                      const fm_morph_element *element, int dilate_first,
                                      int binarize, int binary, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* FASTMOG_CUDA_MORPHOLOGY_LAUNCH_H */
