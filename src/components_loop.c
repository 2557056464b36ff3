/*
 * components_loop.c - the host loop of connected-component labelling. See
 * components_loop.h.
 *
 * Union-find over pixel indices in the labels buffer itself: a pass links
 * each foreground pixel to its earlier foreground neighbours, always the
 * larger root under the smaller, so every pixel's parent comes before it and
 * one forward pass flattens the forest; a second pass numbers each region at
 * its root (its first pixel in raster order) and gathers its statistics.
 * OpenCV's numbering is then applied: by first pixel for 4-connectivity, by
 * first 2x2 block for 8-connectivity, whose scan works on blocks.
 */
#include "components_loop.h"

#include <stdlib.h>
#include <string.h>

typedef struct gathered {
    int32_t x0, y0, x1, y1, area;
    uint64_t sum_x, sum_y;
    int64_t first_block;            /* raster index of the first 2x2 block */
} gathered;

static inline int32_t *row_of(int32_t *labels, size_t pitch, int y)
{
    return (int32_t *)((unsigned char *)labels + (size_t)y * pitch);
}

/* The labels slot of pixel index i. */
#define SLOT(i) (row_of(labels, labels_pitch, (i) / width)[(i) % width])

/* The root of pixel i, halving the path on the way. */
static int32_t find(int32_t *labels, size_t labels_pitch, int width, int32_t i)
{
    while (SLOT(i) != i) {
        int32_t parent = SLOT(i);
        SLOT(i) = SLOT(parent);
        i = parent;
    }
    return i;
}

static void unite(int32_t *labels, size_t labels_pitch, int width, int32_t a, int32_t b)
{
    a = find(labels, labels_pitch, width, a);
    b = find(labels, labels_pitch, width, b);
    if (a < b)
        SLOT(b) = a;
    else if (b < a)
        SLOT(a) = b;
}

/* A region's place in OpenCV's 8-connectivity numbering. Keys are unique:
 * two 8-connected regions never share a 2x2 block. */
typedef struct keyed {
    int64_t first_block;
    int32_t id;
} keyed;

static int by_first_block(const void *pa, const void *pb)
{
    int64_t a = ((const keyed *)pa)->first_block, b = ((const keyed *)pb)->first_block;
    return (a > b) - (a < b);
}

int fm_components_cpu(const unsigned char *mask, size_t mask_pitch, int width, int height,
                      unsigned char foreground, int connectivity, int64_t min_area,
                      int32_t *labels, size_t labels_pitch,
                      fm_component **components, int *count)
{
    if (mask == NULL || labels == NULL || components == NULL || count == NULL
        || width <= 0 || height <= 0 || (int64_t)width * height >= INT32_MAX
        || (connectivity != 4 && connectivity != 8) || mask_pitch < (size_t)width
        || labels_pitch < (size_t)width * 4 || labels_pitch % 4 != 0)
        return FM_CC_EINVAL;
    *components = NULL;
    *count = 0;
    const int eight = connectivity == 8;

    /* 1. link each foreground pixel to its earlier foreground neighbours */
    for (int y = 0; y < height; y++) {
        const unsigned char *m = mask + (size_t)y * mask_pitch;
        const unsigned char *up = y > 0 ? m - mask_pitch : NULL;
        int32_t *l = row_of(labels, labels_pitch, y);
        for (int x = 0; x < width; x++) {
            if (m[x] != foreground) {
                l[x] = -1;
                continue;
            }
            int32_t i = (int32_t)y * width + x;
            l[x] = i;
            if (x > 0 && m[x - 1] == foreground)
                unite(labels, labels_pitch, width, i, i - 1);
            if (up != NULL) {
                int32_t above = i - width;
                if (up[x] == foreground)
                    unite(labels, labels_pitch, width, i, above);
                if (eight && x > 0 && up[x - 1] == foreground)
                    unite(labels, labels_pitch, width, i, above - 1);
                if (eight && x + 1 < width && up[x + 1] == foreground)
                    unite(labels, labels_pitch, width, i, above + 1);
            }
        }
    }

    /* 2. number the regions at their roots, in raster order, and gather */
    gathered *g = NULL;
    int32_t n = 0, cap = 0;
    const int64_t blocks_per_row = (width + 1) / 2;
    for (int y = 0; y < height; y++) {
        int32_t *l = row_of(labels, labels_pitch, y);
        for (int x = 0; x < width; x++) {
            if (l[x] < 0)
                continue;
            int32_t i = (int32_t)y * width + x, id;
            /* earlier pixels already hold their number + 1; this one still
             * its parent, which comes before it (or is itself: a new root) */
            if (l[x] == i) {
                if (n == cap) {
                    int32_t grown = cap ? 2 * cap : 64;
                    gathered *more = realloc(g, (size_t)grown * sizeof *g);
                    if (more == NULL) {
                        free(g);
                        return FM_CC_ENOMEM;
                    }
                    g = more;
                    cap = grown;
                }
                id = n++;
                g[id] = (gathered){x, y, x, y, 0, 0, 0, INT64_MAX};
            }
            else {
                id = SLOT(l[x]) - 1;
            }
            gathered *r = &g[id];
            if (x < r->x0) r->x0 = x;
            if (x > r->x1) r->x1 = x;
            r->y1 = y;                            /* rows come in order */
            r->area++;
            r->sum_x += (uint64_t)x;
            r->sum_y += (uint64_t)y;
            int64_t block = (int64_t)(y / 2) * blocks_per_row + x / 2;
            if (block < r->first_block)
                r->first_block = block;
            l[x] = id + 1;
        }
    }

    /* 3. OpenCV's numbering, the small regions dropped */
    keyed *order = malloc((size_t)(n ? n : 1) * sizeof *order);
    int32_t *renumber = malloc((size_t)(n ? n : 1) * sizeof *renumber);
    if (order == NULL || renumber == NULL) {
        free(order);
        free(renumber);
        free(g);
        return FM_CC_ENOMEM;
    }
    for (int32_t k = 0; k < n; k++)
        order[k] = (keyed){eight ? g[k].first_block : k, k};
    if (eight)
        qsort(order, (size_t)n, sizeof *order, by_first_block);
    int32_t kept = 0;
    for (int32_t k = 0; k < n; k++) {
        int32_t id = order[k].id;
        renumber[id] = g[id].area >= min_area ? ++kept : 0;
    }
    fm_component *out = kept ? malloc((size_t)kept * sizeof *out) : NULL;
    if (kept && out == NULL) {
        free(order);
        free(renumber);
        free(g);
        return FM_CC_ENOMEM;
    }
    for (int32_t k = 0; k < n; k++) {
        const gathered *r = &g[order[k].id];
        int32_t label = renumber[order[k].id];
        if (label == 0)
            continue;
        out[label - 1] = (fm_component){
            r->x0, r->y0, r->x1 - r->x0 + 1, r->y1 - r->y0 + 1, r->area,
            (double)r->sum_x / (double)r->area, (double)r->sum_y / (double)r->area};
    }
    for (int y = 0; y < height; y++) {
        int32_t *l = row_of(labels, labels_pitch, y);
        for (int x = 0; x < width; x++)
            l[x] = l[x] < 0 ? 0 : renumber[l[x] - 1];
    }
    free(order);
    free(renumber);
    free(g);
    *components = out;
    *count = kept;
    return FM_CC_OK;
}
