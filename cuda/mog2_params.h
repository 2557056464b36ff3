/* The MOG2 parameters and per-frame rates as the maths uses them, the model's
 * layout in memory, and OpenCV's frame bookkeeping: what crosses the C
 * boundary between src/ and cuda/. Plain C, no per-pixel maths. */
#ifndef FASTMOG_MOG2_PARAMS_H
#define FASTMOG_MOG2_PARAMS_H

#include <stddef.h>

/* Loops over modes run to this compile-time bound (and stop at the pixel's
 * mode count), so that every index is a constant once unrolled: the kernel
 * then keeps a pixel's modes in registers. OpenCV allows up to 255. */
#define FM_MOG2_MAX_MIXTURES 8

/*
 * Algorithm parameters, already in the types the maths uses.
 * OpenCV keeps varThreshold as a double but only ever uses (float)varThreshold;
 * every other threshold is a float member.  Convert Python floats with a
 * single (float) cast from double, as OpenCV's setters do.
 * var_min / var_max are the user's values; the update uses
 * MIN(var_min, var_max) and MAX(var_min, var_max) like OpenCV does.
 */
typedef struct fm_mog2_params {
    int n_mixtures;                       /* K, 1..FM_MOG2_MAX_MIXTURES */
    float var_threshold;                  /* Tb  (float)varThreshold */
    float background_ratio;               /* TB */
    float var_threshold_gen;              /* Tg */
    float var_init;
    float var_min;
    float var_max;
    float complexity_reduction_threshold; /* fCT; only enters via the double prune */
    float shadow_threshold;               /* tau */
    unsigned char shadow_value;           /* mask value for shadows */
    unsigned char detect_shadows;         /* 0 / 1 */
} fm_mog2_params;

/* Per-frame constants derived from the effective learning rate. */
typedef struct fm_mog2_rates {
    float alpha_t; /* (float)learningRate */
    float alpha1;  /* 1.f - alpha_t, computed in float */
    float prune;   /* (float)(-learningRate * (double)fCT), computed in double */
} fm_mog2_rates;

/*
 * Frame bookkeeping, done by the caller once per apply(), as OpenCV does:
 *
 *   1. if (frames_seen == 0 || requested >= 1 || size/channels/depth changed)
 *          reset the model (mode_count = 0) and frames_seen = 0;
 *      (fm_mog2_needs_reset covers the first two conditions; note it tests
 *       the *requested* rate, so apply(lr=1) always restarts the model.
 *       fastmog also restarts when n_mixtures changes, where OpenCV keeps a
 *       model whose layout no longer fits.)
 *      A known-foreground mask does not change any of this: the frame still
 *      counts.
 *   2. frames_seen += 1;
 *   3. rate = fm_mog2_learning_rate(requested, frames_seen, history);
 *      (OpenCV asserts rate >= 0; a NaN or negative result is an error.)
 *   4. rates = fm_mog2_make_rates(params, rate); run the pixels.
 */
static inline int fm_mog2_needs_reset(long frames_seen, double requested)
{
    return frames_seen == 0 || requested >= 1.0;
}

/* Effective learning rate.  frames_seen is the count *after* this frame was
 * added.  A requested rate >= 0 is used from the second frame on; otherwise
 * (negative = automatic, or the first frame after a reset) the rate is
 * 1/min(2*frames_seen, history) in double: 1/2 on the first frame (1 if
 * history == 1), 1/4 on the second, ... down to 1/history. */
static inline double fm_mog2_learning_rate(double requested, long frames_seen,
                                           int history)
{
    long twice, denom;
    if (requested >= 0.0 && frames_seen > 1)
        return requested;
    twice = 2 * frames_seen;
    denom = twice < (long)history ? twice : (long)history; /* std::min */
    return 1.0 / (double)denom;
}

static inline fm_mog2_rates fm_mog2_make_rates(const fm_mog2_params *p,
                                               double learning_rate)
{
    fm_mog2_rates r;
    r.alpha_t = (float)learning_rate;
    r.alpha1 = 1.0f - r.alpha_t;
    /* OpenCV passes float(-learningRate*fCT): the product is a double. */
    r.prune = (float)(-learning_rate * (double)p->complexity_reduction_threshold);
    return r;
}

/* A MOG2 model on the GPU (K = n_mixtures, C = channels): tiles of
 * FM_MOG2_TILE pixels consecutive in the frame (row-major), each of
 * FM_MOG2_TILE_FLOATS(K, C) floats; pixel i is lane l = i % TILE of tile
 * i / TILE. A tile holds
 *     first, slot by slot, its lanes' weights:     k * TILE + l
 *     then, slot by slot, each lane's variance and C means together
 *     (FM_MOG2_SLOT_FLOATS(C) = 1 + C floats, f = 0 the variance, 1 + c
 *     the mean of channel c):     K * TILE + (k * TILE + l) * (1 + C) + f
 * A warp of one frame's kernel (a row of 32 pixels) reads one slot's
 * weights, or its variances and means, as one contiguous run of memory
 * (coalesced; two runs where the width is not a multiple of 32; a pass's
 * warp of 8x4 pixels reads four runs, one a row, once a pass: cuda/mog2.cu,
 * column_in_block), and every field is a constant offset from one of
 * the pixel's two addresses (cuda/MOG2_NOTES.md, v12 and v13). A pixel that
 * misses slot 0 reads the slots past it, while its neighbours may not: its
 * variance and means together fill its share of a 32-byte sector (2 lanes
 * of BGR, 4 of grey), where rows of one field each would fetch a sector per
 * field for the 4 bytes it uses (6 % fewer bytes a grey pixel of a road
 * scene, 17 % BGR; v13).
 * The mode counts are apart, mode_count[i] a byte, and mode_count = 0
 * everywhere is the whole initialisation. (The host keeps each pixel's
 * modes together instead: fm_mog2_host_model in mog2_loop.h.) */
#define FM_MOG2_TILE 32
#define FM_MOG2_TILE_FLOATS(modes, channels) ((modes) * (2 + (channels)) * FM_MOG2_TILE)
#define FM_MOG2_SLOT_FLOATS(channels) (1 + (channels))

typedef struct fm_mog2_model {
    float *modes;
    unsigned char *mode_count;
    int width;
    int height;
    int channels;
    int n_mixtures;     /* K the model was made for: no kernel reads beyond */
} fm_mog2_model;

/* One frame of a MOG2 update: its values (uint8 or float32, model.channels
 * per pixel), an optional known-foreground mask (non-zero pixels are
 * foreground and not learned), where its uint8 mask goes, and its rates. */
typedef struct fm_mog2_frame_io {
    const void *frame;
    const unsigned char *known;   /* NULL: no known foreground */
    unsigned char *mask;
    size_t frame_pitch, known_pitch, mask_pitch;  /* bytes between rows */
    fm_mog2_rates rates;
    int restart;                  /* the model restarts (no modes) first */
} fm_mog2_frame_io;

#endif
