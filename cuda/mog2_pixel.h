/*
 * mog2_pixel.h - one pixel of MOG2 background subtraction, shared by the
 * host C code (src/mog2_loop.c) and the CUDA kernels.
 *
 * Goal: bit-exact agreement with OpenCV's CPU BackgroundSubtractorMOG2
 * (modules/video/src/bgfg_gaussmix2.cpp, non-OpenCL path) for 4.x and 5.x.
 * Every float operation below happens in the same order, with the same
 * operand types, as in OpenCV; values OpenCV computes in double are computed
 * in double here (host side, once per frame: see fm_mog2_make_rates()).
 *
 * Compilation requirements for exactness (IEEE binary32, round to nearest):
 *   gcc/clang (host): -ffp-contract=off.  GCC's default is
 *       -ffp-contract=fast, which fuses a*b+c into an FMA whenever the target
 *       has one (-march=native, x86-64-v3, aarch64...) and changes results.
 *       Do not use -ffast-math / -Ofast.  x86-64 SSE math (FLT_EVAL_METHOD 0)
 *       is assumed; no x87.
 *   nvcc (device): --fmad=false, and NOT --use_fast_math (keeps the defaults
 *       -prec-div=true, -ftz=false, so '/' is correctly rounded and
 *       denormals are kept, as on the CPU).
 *
 * The header has no dependency on <math.h>: comparisons are written out so
 * that NaN behaves exactly as OpenCV's MIN/MAX macros and std::abs do.
 *
 * The per-pixel functions take pointers already offset by the pixel and the
 * stride between its modes: 1 for the kernels' registers and the host's
 * per-pixel blocks (mog2_params.h and mog2_loop.h have the models' layouts).
 */
#ifndef FASTMOG_MOG2_PIXEL_H
#define FASTMOG_MOG2_PIXEL_H

#include <stddef.h>

#include "mog2_params.h"

#ifdef __CUDACC__
#define FM_HOST_DEVICE __host__ __device__
#else
/* Inlined into the host loop, so the channel count and mode bound are
 * constants there too (as the kernel's templates make them). */
#define FM_HOST_DEVICE __attribute__((always_inline))
#endif

#ifdef __CUDACC__
#define FM_UNROLL _Pragma("unroll")
#else
#define FM_UNROLL
#endif
/* Channels handled: 1 (grey), 2, 3 (BGR), 4 (BGRA).  Sizes the per-pixel
 * difference scratch. */
#define FM_MOG2_MAX_CHANNELS 4

/* FLT_EPSILON (2^-23), written out so device code needs no <float.h>. */
#define FM_MOG2_FLT_EPSILON 1.1920928955078125e-7f

/* Swap modes a and b (weight, variance, all channel means) of one pixel. */
FM_HOST_DEVICE static inline void fm_mog2_swap_modes(float *weight, float *variance,
                                                     float *mean, size_t stride,
                                                     int channels, int a, int b)
{
    float t;
    int c;
    t = weight[(size_t)a * stride];
    weight[(size_t)a * stride] = weight[(size_t)b * stride];
    weight[(size_t)b * stride] = t;
    t = variance[(size_t)a * stride];
    variance[(size_t)a * stride] = variance[(size_t)b * stride];
    variance[(size_t)b * stride] = t;
    FM_UNROLL
    for (c = 0; c < channels; ++c) {
        size_t ia = ((size_t)a * channels + c) * stride;
        size_t ib = ((size_t)b * channels + c) * stride;
        t = mean[ia];
        mean[ia] = mean[ib];
        mean[ib] = t;
    }
}

/*
 * Shadow test (Prati et al.): is x a darker copy of one of the leading
 * (background) modes?  Walks the modes in order until their cumulative weight
 * exceeds TB, exactly like OpenCV's detectShadowGMM.
 */
FM_HOST_DEVICE static inline int fm_mog2_is_shadow(const fm_mog2_params *p,
                                                   const float *x, int channels,
                                                   int nmodes, const float *weight,
                                                   const float *variance,
                                                   const float *mean, size_t stride,
                                                   int bound)
{
    const float tb = p->var_threshold;
    const float tbr = p->background_ratio;
    const float tau = p->shadow_threshold;
    float wsum = 0.0f;
    int m, c;

    FM_UNROLL
    for (m = 0; m < bound; ++m) {
        if (m >= nmodes)
            break;
        const float *mu = mean + (size_t)m * channels * stride;
        float dot = 0.0f;  /* x . mu */
        float norm = 0.0f; /* mu . mu */
        FM_UNROLL
        for (c = 0; c < channels; ++c) {
            dot += x[c] * mu[(size_t)c * stride];
            norm += mu[(size_t)c * stride] * mu[(size_t)c * stride];
        }
        if (norm == 0.0f) /* black mode: brightness ratio undefined */
            return 0;
        /* brightness ratio a = dot/norm must lie in [tau, 1] */
        if (dot <= norm && dot >= tau * norm) {
            float a = dot / norm;
            float dist2 = 0.0f;
            FM_UNROLL
            for (c = 0; c < channels; ++c) {
                float d = a * mu[(size_t)c * stride] - x[c];
                dist2 += d * d;
            }
            /* left-to-right product, as OpenCV: ((Tb*var)*a)*a */
            if (dist2 < tb * variance[(size_t)m * stride] * a * a)
                return 1;
        }
        wsum += weight[(size_t)m * stride];
        if (wsum > tbr)
            return 0;
    }
    return 0;
}

/*
 * Update one pixel's mixture with sample x (channel values as float: uint8
 * frames are converted exactly, float frames used as is) and classify it.
 * Returns the mask byte: 0 background, shadow_value shadow, 255 foreground.
 *
 * known_foreground != 0 (OpenCV 4.13+/5.x apply(image, knownForegroundMask,
 * ...), mask value > 0): the pixel is reported as 255 and its model is left
 * untouched for this frame - no decay, no fit, no new mode.
 *
 * Pointers are offset to the pixel; stride: floats between its modes.
 * Write the caller with a constant 'channels' so the loops unroll.
 *
 * *changed gains one bit per mode slot whose variance and means were written
 * (the fitted or new mode, and the slots the reordering moved); every weight
 * of the modes in use changes. The kernel stores only those slots.
 *
 * bound: the most modes a pixel can have (n_mixtures <= bound <=
 * FM_MOG2_MAX_MIXTURES), a constant at every call so the mode loops unroll
 * to it: the kernel's cost grows with the square of it.
 *
 * fits_first != 0: the caller has found that x fits mode 0 and is background
 * there (both of the first mode's tests below pass), as most pixels of a
 * real scene do. The floats are the same either way; passed as a constant, it
 * lets the compiler drop every branch a fit elsewhere or no fit would take.
 */
FM_HOST_DEVICE static inline unsigned char
fm_mog2_update_pixel(const fm_mog2_params *p, const fm_mog2_rates *r,
                     const float *x, int channels, int known_foreground,
                     float *weight, float *variance, float *mean, size_t stride,
                     unsigned char *mode_count, unsigned *changed, int bound,
                     int fits_first)
{
    const float alpha_t = r->alpha_t;
    const float alpha1 = r->alpha1;
    const float prune = r->prune;
    const float tb = p->var_threshold;      /* background distance threshold */
    const float tbr = p->background_ratio;  /* weight share that is background */
    const float tg = p->var_threshold_gen;  /* "fits this mode" threshold */
    const int kmax = p->n_mixtures;
    /* OpenCV's MIN/MAX macros: MIN(a,b) = a > b ? b : a, MAX(a,b) = a < b ? b : a */
    const float var_lo = p->var_min > p->var_max ? p->var_max : p->var_min;
    const float var_hi = p->var_min < p->var_max ? p->var_max : p->var_min;
    float diff[FM_MOG2_MAX_CHANNELS];
    float wsum = 0.0f;
    float inv;
    int nmodes = *mode_count;
    int background = 0;
    int fitted = 0;
    int m, c;

    if (known_foreground)
        return 255;

    /* Pass over the modes, strongest first.  Note nmodes shrinks when a mode
     * is pruned, which also shortens this loop (OpenCV does the same).  Every
     * array index below is a loop constant once unrolled; positions that
     * depend on the data are selected by comparison, never computed. */
    FM_UNROLL
    for (m = 0; m < bound; ++m) {
        if (m >= nmodes)
            break;
        /* every mode decays; prune <= 0 pushes weak modes below zero */
        float w = alpha1 * weight[(size_t)m * stride] + prune;
        /* where mode m ends up, as a one-bit mask: tested bit by bit, so no
         * compiler turns it back into a computed array index */
        unsigned dest = 1u << m;

        if (!fitted) {
            float var = variance[(size_t)m * stride];
            float dist2 = 0.0f;
            FM_UNROLL
            for (c = 0; c < channels; ++c) {
                diff[c] = mean[((size_t)m * channels + c) * stride] - x[c];
                dist2 += diff[c] * diff[c];
            }

            /* background if close to a mode inside the first TB of weight */
            if ((fits_first && m == 0) || (wsum < tbr && dist2 < tb * var))
                background = 1;

            if ((fits_first && m == 0) || dist2 < tg * var) {
                float k, var_new, moved_mean[FM_MOG2_MAX_CHANNELS];
                int j;
                fitted = 1;
                w += alpha_t;
                k = alpha_t / w;
                FM_UNROLL
                for (c = 0; c < channels; ++c)
                    moved_mean[c] = mean[((size_t)m * channels + c) * stride] - k * diff[c];
                var_new = var + k * (dist2 - var);
                var_new = var_new < var_lo ? var_lo : var_new; /* MAX */
                var_new = var_new > var_hi ? var_hi : var_new; /* MIN */

                /* Only this mode gained weight: move it towards the front past
                 * the modes (already updated) that do not outweigh it,
                 * shifting them back by one, as OpenCV's swaps do. Slots
                 * after m never hold it: `j <= m` is folded away once the
                 * loops unroll, so they cost nothing. */
                FM_UNROLL
                for (j = bound - 1; j > 0; --j) {
                    if (j <= m && (dest >> j & 1u) && !(w < weight[(size_t)(j - 1) * stride])) {
                        weight[(size_t)j * stride] = weight[(size_t)(j - 1) * stride];
                        variance[(size_t)j * stride] = variance[(size_t)(j - 1) * stride];
                        FM_UNROLL
                        for (c = 0; c < channels; ++c)
                            mean[((size_t)j * channels + c) * stride] =
                                mean[((size_t)(j - 1) * channels + c) * stride];
                        dest >>= 1;
                    }
                }
                FM_UNROLL
                for (j = 0; j < bound; ++j) {
                    if (j <= m && (dest >> j & 1u)) {
                        variance[(size_t)j * stride] = var_new;
                        FM_UNROLL
                        for (c = 0; c < channels; ++c)
                            mean[((size_t)j * channels + c) * stride] = moved_mean[c];
                    }
                }
                /* slots dest..m: the fitted mode and those it moved past */
                *changed |= ((2u << m) - 1u) & ~(dest - 1u);
            }
        }

        if (w < -prune) { /* weight fell below the complexity prior: drop */
            w = 0.0f;
            --nmodes;
        }
        if (dest == 1u << m) { /* where it was: every mode but a moved fit */
            weight[(size_t)m * stride] = w;
        }
        else {
            int j;
            FM_UNROLL
            for (j = 0; j < bound; ++j)
                if (j < m && (dest >> j & 1u))
                    weight[(size_t)j * stride] = w;
        }
        wsum += w;
    }

    /* Renormalise; if (almost) nothing is left, zero the weights - a new
     * mode is then created below. */
    inv = 0.0f;
    if (wsum > FM_MOG2_FLT_EPSILON || -wsum > FM_MOG2_FLT_EPSILON) /* fabsf(wsum) > eps */
        inv = 1.0f / wsum;
    FM_UNROLL
    for (m = 0; m < bound; ++m)
        if (m < nmodes)
            weight[(size_t)m * stride] *= inv;

    /* No mode explains x: add one (or replace the weakest).  Skipped when the
     * learning rate is 0 so a frozen model stays frozen. */
    if (!fitted && alpha_t > 0.0f) {
        unsigned slot, moving; /* one-bit position masks, as above */
        int i;
        if (nmodes < kmax)
            ++nmodes;
        slot = 1u << (nmodes - 1); /* the end, or the weakest when full */
        FM_UNROLL
        for (i = 0; i < bound; ++i) {
            if (slot >> i & 1u) {
                weight[(size_t)i * stride] = nmodes == 1 ? 1.0f : alpha_t;
                FM_UNROLL
                for (c = 0; c < channels; ++c)
                    mean[((size_t)i * channels + c) * stride] = x[c];
                variance[(size_t)i * stride] = p->var_init;
            }
            else if ((slot - 1u) >> i & 1u) { /* the others keep summing to 1 */
                weight[(size_t)i * stride] *= alpha1;
            }
        }
        /* move the new mode forward while it outweighs its predecessor */
        moving = slot;
        FM_UNROLL
        for (i = bound - 1; i > 0; --i) {
            if ((moving >> i & 1u) && !(alpha_t < weight[(size_t)(i - 1) * stride])) {
                fm_mog2_swap_modes(weight, variance, mean, stride, channels, i, i - 1);
                moving >>= 1;
            }
        }
        *changed |= ((slot << 1) - 1u) & ~(moving - 1u); /* slots moving..slot */
    }

    *mode_count = (unsigned char)nmodes;

    if (background)
        return 0;
    if (p->detect_shadows &&
        fm_mog2_is_shadow(p, x, channels, nmodes, weight, variance, mean, stride,
                          bound))
        return p->shadow_value;
    return 255;
}

/*
 * Background value of one pixel: weighted mean of the leading modes until
 * their cumulative weight exceeds TB (the mode that crosses TB is included).
 * Same float order as OpenCV's getBackgroundImage_intern.  Written as floats;
 * convert with fm_mog2_saturate_u8() for uint8 models.  OpenCV only supports
 * 1 and 3 channels here; 2 and 4 channels follow the same formula.
 */
FM_HOST_DEVICE static inline void
fm_mog2_background_pixel(const fm_mog2_params *p, int channels,
                         const float *weight, const float *mean, size_t stride,
                         int nmodes, float *out)
{
    float acc[FM_MOG2_MAX_CHANNELS];
    float wsum = 0.0f;
    float inv;
    int m, c;

    FM_UNROLL
    for (c = 0; c < channels; ++c)
        acc[c] = 0.0f;
    FM_UNROLL
    for (m = 0; m < FM_MOG2_MAX_MIXTURES; ++m) {
        if (m >= nmodes)
            break;
        float w = weight[(size_t)m * stride];
        FM_UNROLL
        for (c = 0; c < channels; ++c)
            acc[c] += w * mean[((size_t)m * channels + c) * stride];
        wsum += w;
        if (wsum > p->background_ratio)
            break;
    }
    inv = 0.0f;
    if (wsum > FM_MOG2_FLT_EPSILON || -wsum > FM_MOG2_FLT_EPSILON)
        inv = 1.0f / wsum;
    FM_UNROLL
    for (c = 0; c < channels; ++c)
        out[c] = acc[c] * inv;
}

/*
 * cv::saturate_cast<uchar>(float): cvRound (round half to even) then clamp
 * to [0, 255].  On x86-64 cvRound of NaN or of a value >= 2^31 gives INT_MIN,
 * which saturates to 0; reproduced here so host and device agree with
 * OpenCV on x86.  Integer arithmetic only - no dependence on the FPU rounding
 * mode or on libm.
 */
FM_HOST_DEVICE static inline unsigned char fm_mog2_saturate_u8(float v)
{
    int i;
    float frac;
    if (!(v < 2147483648.0f)) /* NaN, +inf, too large */
        return 0;
    if (!(v > 0.5f))          /* rounds to <= 0 (0.5 rounds to 0) */
        return 0;
    if (v >= 255.5f)          /* rounds to >= 256 */
        return 255;
    i = (int)v;               /* truncation; v in (0.5, 255.5) */
    frac = v - (float)i;      /* exact */
    if (frac > 0.5f || (frac == 0.5f && (i & 1)))
        ++i;
    return (unsigned char)(i > 255 ? 255 : i);
}

#endif /* FASTMOG_MOG2_PIXEL_H */
