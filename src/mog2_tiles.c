/* The GPU model's tiles (mog2_params.h) to and from the planes of a snapshot
 * (mog2_snapshot.c), on the host: snapshots keep one layout wherever the
 * model ran, and the kernels keep theirs. */
#include "mog2_base.h"

/* Where field f (0 the weight, 1 the variance, 2 + c the mean of channel c)
 * of slot k of lane l is in its tile, in floats (mog2_params.h). */
static size_t in_tile(int modes, int channels, int k, int f, size_t l)
{
    if (f == 0)
        return (size_t)k * FM_MOG2_TILE + l;
    return (size_t)modes * FM_MOG2_TILE
           + ((size_t)k * FM_MOG2_TILE + l) * FM_MOG2_SLOT_FLOATS((size_t)channels)
           + (size_t)(f - 1);
}

/* Copies every field of every slot of every pixel between the tiles and the
 * planes; to_tiles picks the direction. The lanes past the last pixel are
 * not touched. One float at a time: a snapshot is taken once, not per frame. */
static void convert(const fm_mog2_geometry *g, float *tiles, float *weight, float *variance,
                    float *mean, int to_tiles)
{
    const size_t pixels = (size_t)g->width * (size_t)g->height;
    const int modes = g->n_mixtures, channels = g->channels;
    for (size_t i = 0; i < pixels; ++i) {
        float *tile = tiles + i / FM_MOG2_TILE * FM_MOG2_TILE_FLOATS((size_t)modes, channels);
        for (int k = 0; k < modes; ++k) {
            for (int f = 0; f < 2 + channels; ++f) {
                float *at = tile + in_tile(modes, channels, k, f, i % FM_MOG2_TILE);
                size_t plane = f < 2 ? (size_t)k : (size_t)k * channels + (size_t)(f - 2);
                float *planes = f == 0 ? weight : f == 1 ? variance : mean;
                float *in_planes = planes + plane * pixels + i;
                if (to_tiles)
                    *at = *in_planes;
                else
                    *in_planes = *at;
            }
        }
    }
}

void fm_mog2_untile(const fm_mog2_geometry *g, const float *tiles, float *weight,
                    float *variance, float *mean)
{
    /* not written through: to_tiles is 0 */
    convert(g, (float *)tiles, weight, variance, mean, 0);
}

void fm_mog2_tile(const fm_mog2_geometry *g, const float *weight, const float *variance,
                  const float *mean, float *tiles)
{
    /* the planes are only read: to_tiles is 1 */
    convert(g, tiles, (float *)weight, (float *)variance, (float *)mean, 1);
}
