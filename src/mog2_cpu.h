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
 * Processes one frame.
 *   frame: model->height rows of model->width * model->channels uint8
 *          (frame_is_float == 0) or float32 values, rows frame_pitch bytes apart.
 *   known_fg: optional (NULL = none) uint8 mask; a value > 0 marks known
 *          foreground: mask 255, no update.
 *   mask: output uint8, rows mask_pitch bytes apart.
 * Returns FM_MOG2_OK or FM_MOG2_EINVAL (bad sizes or parameters).
 */
int fm_mog2_cpu_apply(const fm_mog2_params *p, const fm_mog2_rates *rates,
                      const void *frame, size_t frame_pitch, int frame_is_float,
                      const unsigned char *known_fg, size_t known_fg_pitch,
                      unsigned char *mask, size_t mask_pitch, const fm_mog2_model *model);

/*
 * Background image (OpenCV's getBackgroundImage): uint8 with saturate_cast
 * (out_is_float == 0) or float32, rows out_pitch bytes apart.
 */
int fm_mog2_cpu_background(const fm_mog2_params *p, const fm_mog2_model *model,
                           int out_is_float, void *out, size_t out_pitch);

#endif
