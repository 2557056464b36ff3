/* The host loop of MOG2: rows of pixels through cuda/mog2_pixel.h. Built with
 * -ffp-contract=off: fused multiply-adds would stop it matching OpenCV. */
#include "mog2_cpu.h"

/* The mode loops have a constant bound (FM_MOG2_MAX_MIXTURES) for the
 * kernel's sake; unrolled here too, they run in 41 % fewer instructions
 * (callgrind, vtest BGR), the same operations in the same order. */
#pragma GCC optimize("O3", "unroll-loops")

#include <string.h>

static int params_ok(const fm_mog2_params *p, const fm_mog2_model *m)
{
    return p != NULL && m != NULL && m->width > 0 && m->height > 0 && m->channels >= 1
           && m->channels <= FM_MOG2_MAX_CHANNELS && p->n_mixtures >= 1
           && p->n_mixtures <= FM_MOG2_MAX_MIXTURES;
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
FM_DEFINE_ROW(3)
FM_DEFINE_ROW(4)

int fm_mog2_cpu_apply(const fm_mog2_params *p, const fm_mog2_rates *r,
                      const void *frame, size_t frame_pitch, int frame_is_float,
                      const unsigned char *known_fg, size_t known_fg_pitch,
                      unsigned char *mask, size_t mask_pitch, const fm_mog2_model *m)
{
    if (!params_ok(p, m) || frame == NULL || mask == NULL)
        return FM_MOG2_EINVAL;
    /* Pixels are independent: rows run on all cores, each with the exact
     * per-pixel code, so the result does not depend on the thread count. */
#pragma omp parallel for schedule(static)
    for (int y = 0; y < m->height; ++y) {
        const void *row = (const unsigned char *)frame + (size_t)y * frame_pitch;
        const unsigned char *kfg = known_fg != NULL ? known_fg + (size_t)y * known_fg_pitch : NULL;
        unsigned char *mrow = mask + (size_t)y * mask_pitch;
        size_t first = (size_t)y * (size_t)m->width;
        switch (m->channels) {
        case 1:
            apply_row_1(p, r, row, frame_is_float, m->width, kfg, mrow, m->weight, m->variance,
                        m->mean, m->mode_count, first, m->stride);
            break;
        case 3:
            apply_row_3(p, r, row, frame_is_float, m->width, kfg, mrow, m->weight, m->variance,
                        m->mean, m->mode_count, first, m->stride);
            break;
        default:
            apply_row_4(p, r, row, frame_is_float, m->width, kfg, mrow, m->weight, m->variance,
                        m->mean, m->mode_count, first, m->stride);
            break;
        }
    }
    return FM_MOG2_OK;
}

int fm_mog2_cpu_background(const fm_mog2_params *p, const fm_mog2_model *m,
                           int out_is_float, void *out, size_t out_pitch)
{
    float v[FM_MOG2_MAX_CHANNELS];
    if (!params_ok(p, m) || out == NULL)
        return FM_MOG2_EINVAL;
#pragma omp parallel for schedule(static) private(v)
    for (int y = 0; y < m->height; ++y) {
        unsigned char *row = (unsigned char *)out + (size_t)y * out_pitch;
        for (int x = 0; x < m->width; ++x) {
            size_t i = (size_t)y * (size_t)m->width + (size_t)x;
            fm_mog2_background_pixel(p, m->channels, m->weight + i, m->mean + i, m->stride,
                                     m->mode_count[i], v);
            if (out_is_float) {
                float *o = (float *)row + (size_t)x * m->channels;
                for (int c = 0; c < m->channels; ++c)
                    o[c] = v[c];
            }
            else {
                unsigned char *o = row + (size_t)x * m->channels;
                for (int c = 0; c < m->channels; ++c)
                    o[c] = fm_mog2_saturate_u8(v[c]);
            }
        }
    }
    return FM_MOG2_OK;
}
