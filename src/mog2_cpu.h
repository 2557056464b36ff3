/* The host loop of MOG2 over cuda/mog2_pixel.h, bit-exact with OpenCV's CPU
 * BackgroundSubtractorMOG2. Plain C11, no Python API; compile with
 * -ffp-contract=off (see mog2_pixel.h). The caller does the frame
 * bookkeeping (mog2_params.h) and passes the effective rates. */
#ifndef FASTMOG_MOG2_CPU_H
#define FASTMOG_MOG2_CPU_H

#include <stddef.h>
#include "../cuda/mog2_pixel.h"

#define FM_MOG2_OK 0
#define FM_MOG2_EINVAL (-1)

/*
 * Updates the model with `count` consecutive frames (fm_mog2_frame_io, in
 * mog2_params.h: uint8 or float32 values, model->channels per pixel; an
 * optional known-foreground mask; where the uint8 mask goes; the frame's
 * rates and whether the model restarts first), exactly as `count` one-frame
 * calls would, in one pass over the model.
 * Returns FM_MOG2_OK or FM_MOG2_EINVAL (bad sizes or parameters).
 */
int fm_mog2_cpu_apply(const fm_mog2_params *p, const fm_mog2_model *model, int is_float,
                      const fm_mog2_frame_io *frames, int count);

/*
 * Background image (OpenCV's getBackgroundImage): uint8 with saturate_cast
 * (out_is_float == 0) or float32, rows out_pitch bytes apart.
 */
int fm_mog2_cpu_background(const fm_mog2_params *p, const fm_mog2_model *model,
                           int out_is_float, void *out, size_t out_pitch);

#endif
