/*
 * mog2_cpu.h - host (CPU) reference implementation of MOG2, bit-exact with
 * OpenCV's CPU BackgroundSubtractorMOG2.  Plain C11, no Python API.
 * Compile with -ffp-contract=off (see cuda/mog2_pixel.h).
 *
 * The caller owns the frame counter and computes the learning rate (see the
 * bookkeeping comment in mog2_pixel.h: fm_mog2_needs_reset,
 * fm_mog2_learning_rate); these functions take the effective rate.
 */
#ifndef FASTMOG_MOG2_CPU_H
#define FASTMOG_MOG2_CPU_H

#include <stddef.h>
#include "../cuda/mog2_pixel.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes (0 = success). */
#define FM_MOG2_OK 0
#define FM_MOG2_EINVAL (-1)

/* Floats in each model array: weight and variance hold K*P, mean K*C*P
 * (P = width*height, K = n_mixtures, C = channels); mode_count holds P bytes. */
size_t fm_mog2_weight_count(const fm_mog2_params *p, int width, int height);
size_t fm_mog2_mean_count(const fm_mog2_params *p, int width, int height, int channels);

/* Start a fresh model: zero-fills every array (only mode_count matters). */
void fm_mog2_cpu_reset(const fm_mog2_params *p, int width, int height, int channels,
                       float *weight, float *variance, float *mean,
                       unsigned char *mode_count);

/*
 * Process one frame.
 *   learning_rate: the effective rate (fm_mog2_learning_rate), >= 0.
 *   frame: height rows of width*channels uint8 (frame_is_float == 0) or
 *          float32 (frame_is_float != 0) values, rows frame_pitch_bytes apart.
 *   known_fg: optional (NULL = none) uint8 mask, rows known_fg_pitch bytes
 *          apart; a value > 0 marks known foreground: mask 255, no update.
 *   mask: output uint8, rows mask_pitch bytes apart.
 *   channels: 1..4.
 * Returns FM_MOG2_OK or FM_MOG2_EINVAL (bad sizes/params, rate < 0 or NaN).
 */
int fm_mog2_cpu_apply(const fm_mog2_params *p, double learning_rate,
                      const void *frame, size_t frame_pitch_bytes,
                      int width, int height, int channels, int frame_is_float,
                      const unsigned char *known_fg, size_t known_fg_pitch,
                      unsigned char *mask, size_t mask_pitch,
                      float *weight, float *variance, float *mean,
                      unsigned char *mode_count);

/*
 * Background image (OpenCV getBackgroundImage).  out_is_float == 0 writes
 * uint8 via saturate_cast semantics (models fed uint8 frames); != 0 writes
 * float32 (models fed float frames - OpenCV returns CV_32F then).  Rows are
 * out_pitch_bytes apart, width*channels values each.
 */
int fm_mog2_cpu_background(const fm_mog2_params *p, int width, int height,
                           int channels, const float *weight, const float *mean,
                           const unsigned char *mode_count, int out_is_float,
                           void *out, size_t out_pitch_bytes);

#ifdef __cplusplus
}
#endif

#endif /* FASTMOG_MOG2_CPU_H */
