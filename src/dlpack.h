/* The DLPack ABI (https://dmlc.github.io/dlpack), versions 0.8 and 1.x:
 * only the parts fastmog exchanges. Layouts must match the specification. */
#ifndef FASTMOG_DLPACK_H
#define FASTMOG_DLPACK_H

#include <stdint.h>

enum { FM_DL_CUDA = 2, FM_DL_CUDA_HOST = 3, FM_DL_CUDA_MANAGED = 13 };
enum { FM_DL_INT = 0, FM_DL_UINT = 1, FM_DL_FLOAT = 2 };

#define FM_DLPACK_MAJOR 1
#define FM_DLPACK_MINOR 0
#define FM_DLPACK_FLAG_READ_ONLY ((uint64_t)1 << 0)

typedef struct fm_dl_device {
    int32_t device_type;
    int32_t device_id;
} fm_dl_device;

typedef struct fm_dl_dtype {
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
} fm_dl_dtype;

typedef struct fm_dl_tensor {
    void *data;
    fm_dl_device device;
    int32_t ndim;
    fm_dl_dtype dtype;
    int64_t *shape;
    int64_t *strides;       /* in elements; NULL means compact row-major */
    uint64_t byte_offset;
} fm_dl_tensor;

/* Capsule name "dltensor" (renamed "used_dltensor" by the consumer). */
typedef struct fm_dl_managed {
    fm_dl_tensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct fm_dl_managed *self);
} fm_dl_managed;

/* Capsule name "dltensor_versioned" ("used_dltensor_versioned"). */
typedef struct fm_dl_managed_versioned {
    uint32_t version_major;
    uint32_t version_minor;
    void *manager_ctx;
    void (*deleter)(struct fm_dl_managed_versioned *self);
    uint64_t flags;
    fm_dl_tensor dl_tensor;
} fm_dl_managed_versioned;

#endif
