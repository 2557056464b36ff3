/* The host loop of MOG2 over cuda/mog2_pixel.h, bit-exact with OpenCV's CPU
 * BackgroundSubtractorMOG2. Plain C11, no Python API; compile with
 * -ffp-contract=off (see mog2_pixel.h). The caller does the frame
 * bookkeeping (mog2_params.h) and passes the effective rates. */
#ifndef FASTMOG_MOG2_LOOP_H
#define FASTMOG_MOG2_LOOP_H

#include <stddef.h>
#include "../cuda/mog2_pixel.h"

#define FM_MOG2_OK 0
#define FM_MOG2_EINVAL (-1)

/* The host's model: each pixel's modes in one block of (2 + C) * K floats
 * (K weights, K variances, then the K * C means), blocks in pixel order,
 * then the mode counts. A pixel's update touches one or two cache lines,
 * where the GPU's tiles (mog2_params.h, laid out for a warp's coalesced
 * loads) would touch two per mode: its weight's row and its slot's run. */
typedef struct fm_mog2_host_model {
    float *blocks;
    unsigned char *mode_count;
    size_t block;               /* floats per pixel */
    int width, height, channels, n_mixtures;
} fm_mog2_host_model;

static inline size_t fm_mog2_host_model_bytes(int width, int height, int channels,
                                              int n_mixtures)
{
    size_t pixels = (size_t)width * (size_t)height;
    return pixels * (size_t)(2 + channels) * (size_t)n_mixtures * sizeof(float) + pixels;
}

static inline fm_mog2_host_model fm_mog2_host_model_at(void *base, int width, int height,
                                                       int channels, int n_mixtures)
{
    fm_mog2_host_model m;
    size_t pixels = (size_t)width * (size_t)height;
    m.block = (size_t)(2 + channels) * (size_t)n_mixtures;
    m.blocks = (float *)base;
    m.mode_count = (unsigned char *)base + pixels * m.block * sizeof(float);
    m.width = width;
    m.height = height;
    m.channels = channels;
    m.n_mixtures = n_mixtures;
    return m;
}

/*
 * Updates the model with `count` consecutive frames (fm_mog2_frame_io, in
 * mog2_params.h: uint8 or float32 values, model->channels per pixel; an
 * optional known-foreground mask; where the uint8 mask goes; the frame's
 * rates and whether the model restarts first), exactly as `count` one-frame
 * calls would, in one pass over the model.
 * Returns FM_MOG2_OK or FM_MOG2_EINVAL (bad sizes or parameters).
 */
int fm_mog2_cpu_apply(const fm_mog2_params *p, const fm_mog2_host_model *model, int is_float,
                      const fm_mog2_frame_io *frames, int count);

/*
 * Background image (OpenCV's getBackgroundImage): uint8 with saturate_cast
 * (out_is_float == 0) or float32, rows out_pitch bytes apart.
 */
int fm_mog2_cpu_background(const fm_mog2_params *p, const fm_mog2_host_model *model,
                           int out_is_float, void *out, size_t out_pitch);

#endif
