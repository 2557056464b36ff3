/* The GPU model's tiles (mog2_params.h) to and from the planes of a snapshot
 * (mog2_snapshot.c), on the host: snapshots keep one layout wherever the
 * model ran, and the kernels keep theirs. */
#include "mog2_base.h"

#include <string.h>

/* Copies every field of every slot between the tiles and the planes, in the
 * tiles' order (so the tiles are walked once, front to back); to_tiles picks
 * the direction. The lanes past the last pixel are not touched. */
static void convert(const fm_mog2_geometry *g, float *tiles, float *weight, float *variance,
                    float *mean, int to_tiles)
{
    const size_t pixels = (size_t)g->width * (size_t)g->height;
    const size_t channels = (size_t)g->channels;
    const int fields = 2 + g->channels;
    float *at = tiles;
    for (size_t first = 0; first < pixels; first += FM_MOG2_TILE) {
        size_t lanes = pixels - first < FM_MOG2_TILE ? pixels - first : FM_MOG2_TILE;
        for (int k = 0; k < g->n_mixtures; ++k) {
            for (int f = 0; f < fields; ++f, at += FM_MOG2_TILE) {
                float *plane = f == 0   ? weight + (size_t)k * pixels
                               : f == 1 ? variance + (size_t)k * pixels
                                        : mean + ((size_t)k * channels + (size_t)(f - 2)) * pixels;
                if (to_tiles)
                    memcpy(at, plane + first, lanes * sizeof(float));
                else
                    memcpy(plane + first, at, lanes * sizeof(float));
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
