/* The host loop of MOG2: rows of pixels through cuda/mog2_pixel.h. Built with
 * -ffp-contract=off: fused multiply-adds would stop it matching OpenCV. */
#include "mog2_loop.h"

/* The mode loops have a constant bound (FM_MOG2_MAX_MIXTURES) for the
 * kernel's sake; unrolled here too, they run in 41 % fewer instructions
 * (callgrind, vtest BGR), the same operations in the same order. */
#pragma GCC optimize("O3", "unroll-loops")

#include <string.h>

static int params_ok(const fm_mog2_params *p, const fm_mog2_host_model *m)
{
    return p != NULL && m != NULL && m->width > 0 && m->height > 0 && m->channels >= 1
           && m->channels <= FM_MOG2_MAX_CHANNELS && p->n_mixtures >= 1
           && p->n_mixtures <= FM_MOG2_MAX_MIXTURES && p->n_mixtures == m->n_mixtures;
}

/* One row through `count` frames, frame after frame: the row's modes (tens
 * of kilobytes) stay in cache from one frame to the next, and the pixel loop
 * is the same as for one frame. Channel count and value type are fixed at
 * compile time so the pixel loops unroll. */
#define FM_DEFINE_ROW(NAME, CH, T)                                                \
    static void NAME(const fm_mog2_params *p, const fm_mog2_host_model *m,       \
                     const fm_mog2_frame_io *frames, int count, int y)           \
    {                                                                             \
        const size_t first = (size_t)y * (size_t)m->width;                        \
        const int kmax = m->n_mixtures;                                           \
        float xv[CH];                                                             \
        unsigned changed = 0; /* only the kernel stores by it */                  \
        for (int f = 0; f < count; ++f) {                                         \
            const fm_mog2_frame_io *io = &frames[f];                              \
            const fm_mog2_rates rates = io->rates;                                \
            const int restart = io->restart;                                      \
            const T *row = (const T *)((const char *)io->frame                    \
                                       + (size_t)y * io->frame_pitch);            \
            const unsigned char *known =                                          \
                io->known != NULL ? io->known + (size_t)y * io->known_pitch : NULL; \
            unsigned char *mask = io->mask + (size_t)y * io->mask_pitch;          \
            for (int xi = 0; xi < m->width; ++xi) {                               \
                size_t i = first + (size_t)xi;                                    \
                if (restart)                                                      \
                    m->mode_count[i] = 0;                                         \
                if (known != NULL && known[xi] != 0) {                            \
                    mask[xi] = 255;                                               \
                    continue;                                                     \
                }                                                                 \
                /* uint8 -> float is exact, as OpenCV's convertTo */              \
                for (int c = 0; c < (CH); ++c)                                    \
                    xv[c] = (float)row[(size_t)xi * (CH) + c];                    \
                float *w = m->blocks + i * m->block;                              \
                mask[xi] = fm_mog2_update_pixel(p, &rates, xv, (CH), 0, w, w + kmax, \
                                                w + 2 * kmax, 1, m->mode_count + i, \
                                                &changed, FM_MOG2_MAX_MIXTURES, 0); \
            }                                                                     \
        }                                                                         \
    }

FM_DEFINE_ROW(apply_row_1_u8, 1, unsigned char)
FM_DEFINE_ROW(apply_row_3_u8, 3, unsigned char)
FM_DEFINE_ROW(apply_row_4_u8, 4, unsigned char)
FM_DEFINE_ROW(apply_row_1_f32, 1, float)
FM_DEFINE_ROW(apply_row_3_f32, 3, float)
FM_DEFINE_ROW(apply_row_4_f32, 4, float)

typedef void (*apply_row_fn)(const fm_mog2_params *, const fm_mog2_host_model *,
                             const fm_mog2_frame_io *, int, int);

int fm_mog2_cpu_apply(const fm_mog2_params *p, const fm_mog2_host_model *m, int is_float,
                      const fm_mog2_frame_io *frames, int count)
{
    static const apply_row_fn rows[2][4] = {
        {apply_row_1_u8, NULL, apply_row_3_u8, apply_row_4_u8},
        {apply_row_1_f32, NULL, apply_row_3_f32, apply_row_4_f32},
    };
    if (!params_ok(p, m) || m->channels == 2 || frames == NULL || count < 1)
        return FM_MOG2_EINVAL;
    for (int f = 0; f < count; ++f)
        if (frames[f].frame == NULL || frames[f].mask == NULL)
            return FM_MOG2_EINVAL;
    apply_row_fn row = rows[is_float != 0][m->channels - 1];
    /* Pixels are independent: rows run on all cores, each with the exact
     * per-pixel code, so the result does not depend on the thread count. */
#pragma omp parallel for schedule(static)
    for (int y = 0; y < m->height; ++y)
        row(p, m, frames, count, y);
    return FM_MOG2_OK;
}

int fm_mog2_cpu_background(const fm_mog2_params *p, const fm_mog2_host_model *m,
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
            const float *w = m->blocks + i * m->block;
            fm_mog2_background_pixel(p, m->channels, w, w + 2 * m->n_mixtures, 1,
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
