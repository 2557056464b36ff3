/*
 * mog2_cpu.c - host loop over cuda/mog2_pixel.h.  See mog2_cpu.h.
 * Build with -ffp-contract=off: the per-pixel maths must not be fused into
 * FMAs or it stops matching OpenCV bit for bit.
 */
#include "mog2_cpu.h"

#include <string.h>

static int params_ok(const fm_mog2_params *p, int width, int height, int channels)
{
    return p != NULL && width > 0 && height > 0 && channels >= 1 &&
           channels <= FM_MOG2_MAX_CHANNELS && p->n_mixtures >= 1 &&
           p->n_mixtures <= FM_MOG2_MAX_MIXTURES;
}

size_t fm_mog2_weight_count(const fm_mog2_params *p, int width, int height)
{
    return (size_t)p->n_mixtures * (size_t)width * (size_t)height;
}

size_t fm_mog2_mean_count(const fm_mog2_params *p, int width, int height, int channels)
{
    return fm_mog2_weight_count(p, width, height) * (size_t)channels;
}

void fm_mog2_cpu_reset(const fm_mog2_params *p, int width, int height, int channels,
                       float *weight, float *variance, float *mean,
                       unsigned char *mode_count)
{
    size_t nw = fm_mog2_weight_count(p, width, height);
    memset(weight, 0, nw * sizeof(float));
    memset(variance, 0, nw * sizeof(float));
    memset(mean, 0, nw * (size_t)channels * sizeof(float));
    memset(mode_count, 0, (size_t)width * (size_t)height);
}

/* One row, channel count fixed at compile time so the pixel loops unroll. */
#define FM_DEFINE_ROW(CH)                                                         \
    static void apply_row_##CH(const fm_mog2_params *p, const fm_mog2_rates *r,  \
                               const void *row, int is_float, int width,          \
                               const unsigned char *kfg, unsigned char *mrow,     \
                               float *weight, float *variance, float *mean,       \
                               unsigned char *mode_count, size_t first,           \
                               size_t stride)                                     \
    {                                                                             \
        const unsigned char *row_u8 = (const unsigned char *)row;                 \
        const float *row_f32 = (const float *)row;                                \
        float xv[CH];                                                             \
        int xi, c;                                                                \
        for (xi = 0; xi < width; ++xi) {                                          \
            size_t i = first + (size_t)xi;                                        \
            if (is_float) {                                                       \
                for (c = 0; c < (CH); ++c)                                        \
                    xv[c] = row_f32[(size_t)xi * (CH) + c];                       \
            } else {                                                              \
                /* uint8 -> float is exact, as OpenCV's convertTo */              \
                for (c = 0; c < (CH); ++c)                                        \
                    xv[c] = (float)row_u8[(size_t)xi * (CH) + c];                 \
            }                                                                     \
            mrow[xi] = fm_mog2_update_pixel(p, r, xv, (CH),                       \
                                            kfg != NULL && kfg[xi] != 0,          \
                                            weight + i, variance + i, mean + i,   \
                                            stride, mode_count + i);              \
        }                                                                         \
    }

FM_DEFINE_ROW(1)
FM_DEFINE_ROW(2)
FM_DEFINE_ROW(3)
FM_DEFINE_ROW(4)

int fm_mog2_cpu_apply(const fm_mog2_params *p, double learning_rate,
                      const void *frame, size_t frame_pitch_bytes,
                      int width, int height, int channels, int frame_is_float,
                      const unsigned char *known_fg, size_t known_fg_pitch,
                      unsigned char *mask, size_t mask_pitch,
                      float *weight, float *variance, float *mean,
                      unsigned char *mode_count)
{
    fm_mog2_rates r;
    size_t stride;
    int y;

    if (!params_ok(p, width, height, channels) || frame == NULL || mask == NULL ||
        weight == NULL || variance == NULL || mean == NULL || mode_count == NULL)
        return FM_MOG2_EINVAL;
    if (!(learning_rate >= 0.0)) /* OpenCV: CV_Assert(learningRate >= 0) */
        return FM_MOG2_EINVAL;

    r = fm_mog2_make_rates(p, learning_rate);
    stride = (size_t)width * (size_t)height;

    for (y = 0; y < height; ++y) {
        const void *row = (const unsigned char *)frame + (size_t)y * frame_pitch_bytes;
        const unsigned char *kfg =
            known_fg != NULL ? known_fg + (size_t)y * known_fg_pitch : NULL;
        unsigned char *mrow = mask + (size_t)y * mask_pitch;
        size_t first = (size_t)y * (size_t)width;
        switch (channels) {
        case 1:
            apply_row_1(p, &r, row, frame_is_float, width, kfg, mrow, weight,
                        variance, mean, mode_count, first, stride);
            break;
        case 2:
            apply_row_2(p, &r, row, frame_is_float, width, kfg, mrow, weight,
                        variance, mean, mode_count, first, stride);
            break;
        case 3:
            apply_row_3(p, &r, row, frame_is_float, width, kfg, mrow, weight,
                        variance, mean, mode_count, first, stride);
            break;
        default:
            apply_row_4(p, &r, row, frame_is_float, width, kfg, mrow, weight,
                        variance, mean, mode_count, first, stride);
            break;
        }
    }
    return FM_MOG2_OK;
}

int fm_mog2_cpu_background(const fm_mog2_params *p, int width, int height,
                           int channels, const float *weight, const float *mean,
                           const unsigned char *mode_count, int out_is_float,
                           void *out, size_t out_pitch_bytes)
{
    size_t stride;
    float v[FM_MOG2_MAX_CHANNELS];
    int x, y, c;

    if (!params_ok(p, width, height, channels) || weight == NULL || mean == NULL ||
        mode_count == NULL || out == NULL)
        return FM_MOG2_EINVAL;

    stride = (size_t)width * (size_t)height;
    for (y = 0; y < height; ++y) {
        unsigned char *row = (unsigned char *)out + (size_t)y * out_pitch_bytes;
        for (x = 0; x < width; ++x) {
            size_t i = (size_t)y * (size_t)width + (size_t)x;
            fm_mog2_background_pixel(p, channels, weight + i, mean + i, stride,
                                     mode_count[i], v);
            if (out_is_float) {
                float *o = (float *)row + (size_t)x * channels;
                for (c = 0; c < channels; ++c)
                    o[c] = v[c];
            } else {
                unsigned char *o = row + (size_t)x * channels;
                for (c = 0; c < channels; ++c)
                    o[c] = fm_mog2_saturate_u8(v[c]);
            }
        }
    }
    return FM_MOG2_OK;
}
