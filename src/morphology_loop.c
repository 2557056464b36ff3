/*
 * morphology_loop.c - the host loop of erosion and dilation. See
 * morphology_loop.h.
 *
 * Every output row is the running minimum (erosion) or maximum (dilation) of
 * windows of the source rows the element reaches: each element row is a few
 * runs of consecutive columns. The minimum of a run of length L comes from
 * two overlapping windows of the largest power of two P <= L, read from a
 * per-row table of window minima of length 1, 2, 4, 8 and 16 (a thread
 * keeps the tables of the kh source rows it needs in a ring). A full
 * rectangle is separable: its rows are combined first, then one run. Rows
 * are padded with the neutral value (255 for erosion, 0 for dilation), which
 * is OpenCV's default border: what lies outside never counts.
 */
#include "morphology_loop.h"

#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#define PAD 32        /* neutral bytes each side of a row: more than kw / 2 */
#define MAX_SIDE 31   /* the element's largest side (checked by the caller) */
#define LEVELS 5      /* windows of 1, 2, 4, 8 and 16: every run up to 31 */

typedef struct run {
    int offset;       /* first column relative to the anchor */
    int level;        /* log2 of the window, P = 1 << level */
    int second;       /* offset + length - P: the second window */
} run;

static inline void combine(unsigned char *restrict acc, const unsigned char *restrict a,
                           int n, int dilate)
{
    if (dilate) {
#pragma omp simd
        for (int x = 0; x < n; x++)
            acc[x] = acc[x] > a[x] ? acc[x] : a[x];
    }
    else {
#pragma omp simd
        for (int x = 0; x < n; x++)
            acc[x] = acc[x] < a[x] ? acc[x] : a[x];
    }
}

/* levels[k][x]: the minimum (maximum) of padded[x .. x + 2^k - 1]; level 0
 * is the padded row itself, already in place. */
static void window_levels(unsigned char *levels, size_t stride, int padded, int dilate,
                          int needed)
{
    for (int k = 1; k < needed; k++) {
        const unsigned char *prev = levels + (size_t)(k - 1) * stride;
        unsigned char *cur = levels + (size_t)k * stride;
        int half = 1 << (k - 1);
        memcpy(cur, prev, (size_t)padded);
        combine(cur, prev + half, padded - half, dilate);
    }
}

/* Level 0 of `levels`: the source row between neutral pads. */
static void padded_row(unsigned char *levels, const unsigned char *row, int width,
                       unsigned char neutral)
{
    memset(levels, neutral, PAD);
    memcpy(levels + PAD, row, (size_t)width);
    memset(levels + PAD + width, neutral, PAD);
}

/* out op= the run's minimum (maximum) over a row's window table. */
static inline void apply_run(unsigned char *out, const unsigned char *levels, size_t stride,
                             const run *r, int width, int dilate)
{
    const unsigned char *t = levels + (size_t)r->level * stride + PAD;
    combine(out, t + r->offset, width, dilate);
    if (r->second != r->offset)
        combine(out, t + r->second, width, dilate);
}

static int is_full(const unsigned char *element, int n)
{
    for (int i = 0; i < n; i++)
        if (!element[i])
            return 0;
    return 1;
}

static int level_of(int length)
{
    int k = 0;
    while ((2 << k) <= length)
        k++;
    return k;
}

/* The runs of element row j, relative to the anchor column ax. */
static int row_runs(const unsigned char *erow, int kw, int ax, run *runs)
{
    int n = 0;
    for (int i = 0; i < kw;) {
        if (!erow[i]) {
            i++;
            continue;
        }
        int start = i;
        while (i < kw && erow[i])
            i++;
        int length = i - start, level = level_of(length);
        runs[n++] = (run){start - ax, level, start - ax + length - (1 << level)};
    }
    return n;
}

/* Rows [y0, y1) of one erosion (dilation) of a general element. */
static void general_rows(const unsigned char *src, size_t src_pitch, unsigned char *dst,
                         size_t dst_pitch, int width, int height, int kh, int ay,
                         const run *runs, const int *n_runs, int needed, int dilate,
                         unsigned char *ring, size_t stride, int y0, int y1)
{
    const unsigned char neutral = dilate ? 0 : 255;
    const int padded = width + 2 * PAD;
    const size_t slot = (size_t)needed * stride;
    int have = y0 - ay;     /* ring holds the tables of source rows [.., have) */
    for (int y = y0; y < y1; y++) {
        int last = y - ay + kh;                 /* one past the last row needed */
        for (int s = have > y - ay ? have : y - ay; s < last; s++) {
            if (s < 0 || s >= height)
                continue;
            unsigned char *levels = ring + (size_t)(s % kh) * slot;
            padded_row(levels, src + (size_t)s * src_pitch, width, neutral);
            window_levels(levels, stride, padded, dilate, needed);
        }
        have = last;
        unsigned char *out = dst + (size_t)y * dst_pitch;
        memset(out, neutral, (size_t)width);
        for (int j = 0; j < kh; j++) {
            int s = y - ay + j;
            if (s < 0 || s >= height)
                continue;
            const unsigned char *levels = ring + (size_t)(s % kh) * slot;
            for (int r = 0; r < n_runs[j]; r++)
                apply_run(out, levels, stride, &runs[j * (MAX_SIDE / 2 + 1) + r], width, dilate);
        }
    }
}

/* Rows [y0, y1) of one erosion (dilation) of a full kw x kh rectangle. */
static void rect_rows(const unsigned char *src, size_t src_pitch, unsigned char *dst,
                      size_t dst_pitch, int width, int height, int kw, int kh, int ax, int ay,
                      int dilate, unsigned char *levels, size_t stride, int y0, int y1)
{
    const unsigned char neutral = dilate ? 0 : 255;
    const int padded = width + 2 * PAD, level = level_of(kw);
    const run r = {-ax, level, -ax + kw - (1 << level)};
    for (int y = y0; y < y1; y++) {
        memset(levels, neutral, (size_t)padded);
        for (int j = 0; j < kh; j++) {
            int s = y - ay + j;
            if (s >= 0 && s < height)
                combine(levels + PAD, src + (size_t)s * src_pitch, width, dilate);
        }
        window_levels(levels, stride, padded, dilate, level + 1);
        unsigned char *out = dst + (size_t)y * dst_pitch;
        memset(out, neutral, (size_t)width);
        apply_run(out, levels, stride, &r, width, dilate);
    }
}

/* One erosion (dilate = 0) or dilation of src into dst. */
static int one_pass(const unsigned char *src, size_t src_pitch, unsigned char *dst,
                    size_t dst_pitch, int width, int height, const unsigned char *element,
                    int kw, int kh, int dilate)
{
    const int ax = kw / 2, ay = kh / 2;
    const int rect = is_full(element, kw * kh);
    run runs[MAX_SIDE * (MAX_SIDE / 2 + 1)];
    int n_runs[MAX_SIDE], needed = 1;
    for (int j = 0; j < kh; j++) {
        n_runs[j] = row_runs(element + (size_t)j * kw, kw, ax, &runs[j * (MAX_SIDE / 2 + 1)]);
        for (int r = 0; r < n_runs[j]; r++)
            if (runs[j * (MAX_SIDE / 2 + 1) + r].level + 1 > needed)
                needed = runs[j * (MAX_SIDE / 2 + 1) + r].level + 1;
    }
    const size_t stride = (size_t)width + 2 * PAD;
    const size_t per_thread = rect ? LEVELS * stride : (size_t)kh * needed * stride;
    int failed = 0;

#pragma omp parallel reduction(| : failed)
    {
        int threads = 1, me = 0;
#ifdef _OPENMP
        threads = omp_get_num_threads();
        me = omp_get_thread_num();
#endif
        /* contiguous blocks of rows: a thread's ring serves consecutive rows */
        int y0 = (int)((long long)height * me / threads);
        int y1 = (int)((long long)height * (me + 1) / threads);
        unsigned char *scratch = y0 < y1 ? malloc(per_thread) : NULL;
        if (y0 < y1 && scratch == NULL)
            failed = 1;
        else if (y0 < y1 && rect)
            rect_rows(src, src_pitch, dst, dst_pitch, width, height, kw, kh, ax, ay, dilate,
                      scratch, stride, y0, y1);
        else if (y0 < y1)
            general_rows(src, src_pitch, dst, dst_pitch, width, height, kh, ay, runs, n_runs,
                         needed, dilate, scratch, stride, y0, y1);
        free(scratch);
    }
    return failed ? FM_MORPH_ENOMEM : FM_MORPH_OK;
}

int fm_morphology_cpu(const unsigned char *src, size_t src_pitch,
                      unsigned char *dst, size_t dst_pitch,
                      unsigned char *scratch, size_t scratch_pitch,
                      int width, int height,
                      const unsigned char *element, int kw, int kh,
                      int op, int iterations)
{
    if (src == NULL || dst == NULL || element == NULL || width <= 0 || height <= 0
        || kw <= 0 || kh <= 0 || kw > MAX_SIDE || kh > MAX_SIDE || iterations <= 0
        || op < FM_MORPH_ERODE || op > FM_MORPH_CLOSE
        || src_pitch < (size_t)width || dst_pitch < (size_t)width)
        return FM_MORPH_EINVAL;
    const int twice = op == FM_MORPH_OPEN || op == FM_MORPH_CLOSE;
    const long passes = (long)iterations * (twice ? 2 : 1);
    if (passes > 1 && (scratch == NULL || scratch_pitch < (size_t)width))
        return FM_MORPH_EINVAL;
    int any = 0;
    for (int i = 0; i < kw * kh; i++)
        any |= element[i] != 0;
    if (!any)
        return FM_MORPH_EINVAL;

    /* Pass k writes to dst when an even number of passes follow it, else to
     * scratch, so the last lands in dst and no pass reads what it writes. */
    const unsigned char *in = src;
    size_t in_pitch = src_pitch;
    for (long k = 0; k < passes; k++) {
        int dilate = op == FM_MORPH_DILATE
                     || (op == FM_MORPH_OPEN && k >= iterations)
                     || (op == FM_MORPH_CLOSE && k < iterations);
        int to_dst = (passes - 1 - k) % 2 == 0;
        unsigned char *out = to_dst ? dst : scratch;
        size_t out_pitch = to_dst ? dst_pitch : scratch_pitch;
        int rc = one_pass(in, in_pitch, out, out_pitch, width, height, element, kw, kh, dilate);
        if (rc != FM_MORPH_OK)
            return rc;
        in = out;
        in_pitch = out_pitch;
    }
    return FM_MORPH_OK;
}
