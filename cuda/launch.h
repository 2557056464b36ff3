/* The C boundary between src/ (C11) and cuda/ (CUDA C): every symbol the .cu
 * files export is an extern "C" launcher declared here, with the plain structs
 * they take (images, MOG2 parameters; never the per-pixel maths).
 * A launcher only queues work: it returns the launch's cudaError_t, takes the
 * stream last, and never synchronizes, prints or exits. */
#ifndef FASTMOG_CUDA_LAUNCH_H
#define FASTMOG_CUDA_LAUNCH_H

#include <stddef.h>
#include <cuda_runtime_api.h>

#include "mog2_params.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A pitched 2-D image in device memory: rows are `pitch` bytes apart. */
typedef struct fm_image {
    void *data;
    size_t pitch;     /* bytes between the starts of two rows */
    int width;        /* pixels */
    int height;       /* rows */
    int channels;     /* values per pixel */
    int elem_size;    /* bytes per value */
} fm_image;

/* Largest pixel a fill pattern may describe: 4 channels of 8-byte values. */
#define FM_FILL_PATTERN_MAX 32

typedef struct fm_fill_pattern {
    unsigned char bytes[FM_FILL_PATTERN_MAX];  /* one pixel, as stored */
} fm_fill_pattern;

/* Writes `pattern` (channels * elem_size bytes) into every pixel of `dst`. */
cudaError_t fm_launch_fill(fm_image dst, fm_fill_pattern pattern,
                           cudaStream_t stream);

/* Updates `model` with `frame` (uint8 or float32 values, model.channels of
 * them per pixel) and writes the uint8 `mask`. `known_foreground` is a uint8
 * image whose non-zero pixels are foreground and not learned, or has
 * data == NULL. */
cudaError_t fm_launch_mog2_apply(fm_mog2_params params, fm_mog2_rates rates,
                                 fm_image frame, fm_image known_foreground,
                                 fm_image mask, fm_mog2_model model,
                                 cudaStream_t stream);

/* Writes the background image of `model` into `out` (uint8 or float32). */
cudaError_t fm_launch_mog2_background(fm_mog2_params params, fm_mog2_model model,
                                      fm_image out, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
