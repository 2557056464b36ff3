/* The C boundary between src/ (C11) and cuda/ (CUDA C): every symbol the .cu
 * files export is an extern "C" launcher declared here, with the plain structs
 * they take (images, MOG2 parameters; never the per-pixel maths).
 * A launcher only queues work: it returns the launch's cudaError_t, takes the
 * stream last, and never synchronizes, prints or exits. */
#ifndef FASTMOG_CUDA_LAUNCH_H
#define FASTMOG_CUDA_LAUNCH_H

#include <stddef.h>
#include <cuda_runtime_api.h>

#include "image.h"
#include "mog2_params.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest pixel a fill pattern may describe: 4 channels of 8-byte values. */
#define FM_FILL_PATTERN_MAX 32

typedef struct fm_fill_pattern {
    unsigned char bytes[FM_FILL_PATTERN_MAX];  /* one pixel, as stored */
} fm_fill_pattern;

/* Writes `pattern` (channels * elem_size bytes) into every pixel of `dst`. */
cudaError_t fm_launch_fill(fm_image dst, fm_fill_pattern pattern,
                           cudaStream_t stream);

/* Frames of one camera that go through the model in one pass over its state:
 * loaded once, updated `count` times in registers, stored once. */
#define FM_MOG2_MAX_PASS 16

/* Rows of pixels a block of the MOG2 kernels covers (32 pixels wide), and so
 * the tallest frame they take: a launch grid is at most 65535 blocks down. */
#define FM_MOG2_BLOCK_ROWS 4
#define FM_MOG2_MAX_HEIGHT (65535 * FM_MOG2_BLOCK_ROWS)

/* Updates `model` with `count` consecutive frames, in passes of at most
 * FM_MOG2_MAX_PASS, exactly as `count` single-frame updates would. */
cudaError_t fm_launch_mog2_apply(fm_mog2_params params, fm_mog2_model model, int is_float,
                                 const fm_mog2_frame_io *frames, int count,
                                 cudaStream_t stream);

/* One camera of a multi-camera launch: its own model, parameters and frame. */
typedef struct fm_mog2_camera {
    fm_mog2_params params;
    fm_mog2_model model;
    fm_mog2_frame_io io;
    int is_float;
} fm_mog2_camera;

/* Cameras per kernel launch (their table travels as a kernel parameter). */
#define FM_MOG2_CAMERAS_PER_LAUNCH 64

/* Updates `count` models, each with its own frame, in ceil(count / 64)
 * launches, exactly as `count` single-frame updates would. */
cudaError_t fm_launch_mog2_cameras(const fm_mog2_camera *cameras, int count,
                                   cudaStream_t stream);

/* Writes the background image of `model` into `out` (uint8 or float32). */
cudaError_t fm_launch_mog2_background(fm_mog2_params params, fm_mog2_model model,
                                      fm_image out, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
