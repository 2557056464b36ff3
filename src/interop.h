/* What both directions of interop share: the stream integers of the CUDA
 * Array Interface and DLPack, and DLPack's structs. */
#ifndef FASTMOG_INTEROP_H
#define FASTMOG_INTEROP_H

#include "fastmog.h"
#include "dlpack.h"

/* CAI/DLPack stream integers: 1 is the legacy default stream, 2 the
 * per-thread default stream, anything else a cudaStream_t. */
static inline uintptr_t stream_to_protocol_int(cudaStream_t s)
{
    if (s == cudaStreamLegacy || s == NULL)
        return 1;
    if (s == cudaStreamPerThread)
        return 2;
    return (uintptr_t)s;
}

static inline cudaStream_t protocol_int_to_stream(uintptr_t v)
{
    if (v == 1)
        return cudaStreamLegacy;
    if (v == 2)
        return cudaStreamPerThread;
    return (cudaStream_t)v;
}

#endif
