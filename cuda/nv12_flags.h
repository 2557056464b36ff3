/* The words of the NV12 conversion that the host loop, the launcher and the
 * Python functions share: flags and colour matrix ids (no maths, no CUDA). */
#ifndef FASTMOG_CUDA_NV12_FLAGS_H
#define FASTMOG_CUDA_NV12_FLAGS_H

#include <string.h>

/* Flags (bit set) shared by the host function and the launcher. */
#define FM_YUV_RGB 1       /* write R, G, B (COLOR_YUV2RGB_*) instead of B, G, R */
#define FM_YUV_NV21 2      /* chroma pairs are V, U (NV21) instead of U, V (NV12) */
#define FM_YUV_FLAGS_ALL (FM_YUV_RGB | FM_YUV_NV21)

/* Colour matrices, by id.  Only BT.601 video range exists (the one OpenCV's
 * COLOR_YUV2BGR_NV12 uses); a new one gets an id, a case in
 * fm_yuv_matrix_get, a name in fm_yuv_matrix_id and in FM_YUV_MATRIX_NAMES. */
#define FM_YUV_MATRIX_BT601 0
/* For error messages: the names fm_yuv_matrix_id knows. */
#define FM_YUV_MATRIX_NAMES "'bt601'"

/* Host only: the id of a matrix name ("bt601"), or -1 if there is none. */
static inline int fm_yuv_matrix_id(const char *name)
{
    if (strcmp(name, "bt601") == 0)
        return FM_YUV_MATRIX_BT601;
    return -1;
}

#endif
