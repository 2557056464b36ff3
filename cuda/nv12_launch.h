/* The C boundary of cuda/nv12.cu: NV12/NV21 -> BGR/RGB on the GPU.
 *
 * Compiles as C. The launcher only queues work: it returns the launch's
 * cudaError_t, takes the stream last, and never synchronizes, prints or
 * exits. Matrix ids and flags are those of nv12_flags.h. */
#ifndef FASTMOG_CUDA_NV12_LAUNCH_H
#define FASTMOG_CUDA_NV12_LAUNCH_H

#include <cuda_runtime_api.h>

#include "image.h"
#include "nv12_flags.h"

/* The tallest frame (luma rows) the launcher takes: its grid covers 8 row
 * pairs per block and at most 65535 blocks down. */
#define FM_NV12_MAX_HEIGHT (2 * 8 * 65535)

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Converts a W x H frame, equal bit for bit to cv2.cvtColor(COLOR_YUV2BGR_NV12)
 * and, by `flags` (FM_YUV_RGB, FM_YUV_NV21), its RGB / NV21 siblings.
 *   y:   W x H, 1 channel, elem_size 1 (the luma plane).
 *   uv:  W/2 x H/2, 2 channels, elem_size 1 (interleaved chroma). It may lie
 *        anywhere (after y in the same allocation or elsewhere), with its
 *        own pitch.
 *   out: W x H, 3 channels, elem_size 1; must not overlap y or uv.
 *   matrix: an FM_YUV_MATRIX_* id (FM_YUV_MATRIX_BT601).
 * W and H must be even and > 0, H at most FM_NV12_MAX_HEIGHT. Any pitch and
 * alignment works; 4-byte aligned data and pitches take the faster path.
 * Returns cudaErrorInvalidValue, queuing nothing, for anything else.
 */
cudaError_t fm_launch_nv12_to_bgr(fm_image y, fm_image uv, fm_image out,
                                  int matrix, int flags, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
