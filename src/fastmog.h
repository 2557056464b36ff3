/* Internal header of the _fastmog extension: module state, object layouts and
 * the helpers each source file offers the others. Nothing here is public API.
 *
 * Ownership conventions: functions returning PyObject* return a new reference
 * unless documented as borrowed; on failure they return NULL with an exception
 * set. Functions returning int return 0 on success and -1 with an exception
 * set on failure. */
#ifndef FASTMOG_INTERNAL_H
#define FASTMOG_INTERNAL_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <cuda_runtime_api.h>

/* One numpy C-API table for the whole extension, imported in module.c. */
#define NPY_NO_DEPRECATED_API NPY_1_21_API_VERSION
#define PY_ARRAY_UNIQUE_SYMBOL fastmog_ARRAY_API
#ifndef FM_IMPORTS_NUMPY
#define NO_IMPORT_ARRAY
#endif
#include <numpy/arrayobject.h>

#include "../cuda/launch.h"

#define FM_MAX_DEVICES 64

/* ---- module state ------------------------------------------------------ */

/* A block of page-locked host memory cached for reuse. */
typedef struct fm_pinned_block {
    void *ptr;
    size_t size;
} fm_pinned_block;

typedef struct fm_pinned_pool {
    fm_pinned_block *free_blocks;   /* owned array; the blocks are cached */
    size_t n_free, cap_free;
    size_t bytes_cached;            /* sum of free block sizes */
    size_t bytes_in_use;            /* handed out and not yet returned */
    size_t n_host_allocs;           /* cudaHostAlloc calls so far */
} fm_pinned_pool;

/* An object kept alive until the GPU work recorded by `event` is done. */
typedef struct fm_pending_release {
    cudaEvent_t event;
    int device;
    PyObject *obj;                  /* strong reference */
} fm_pending_release;

typedef struct fm_keepalive {
    fm_pending_release *items;      /* owned array */
    size_t n, cap;
} fm_keepalive;

/* Events without timing, reused to fence lifetimes (never for timing). */
typedef struct fm_event_stack {
    cudaEvent_t *events;            /* owned array of owned events */
    size_t n, cap;
} fm_event_stack;

typedef struct fm_Timer fm_Timer;

typedef struct fm_state {
    PyTypeObject *Stream_type;
    PyTypeObject *Event_type;
    PyTypeObject *GpuMat_type;
    PyTypeObject *DeviceBuffer_type;
    PyTypeObject *PinnedBuffer_type;
    PyTypeObject *MOG2_type;
    PyTypeObject *MOG2Host_type;
    PyObject *CudaError;
    PyObject *numpy_dtype_uint8;    /* cached numpy.dtype('uint8') */

    PyTypeObject *Timer_type;
    PyObject *active_timer;         /* contextvars.ContextVar of fastmog.profile() */
    int profiles_active;            /* profile() blocks open in any thread */
    int nvtx_enabled;               /* set_nvtx(True) or FASTMOG_NVTX=1 */
    void *nvtx_domain;              /* nvtxDomainHandle_t of the "fastmog" domain */

    fm_pinned_pool pinned;
    fm_keepalive keepalive;
    fm_event_stack fences[FM_MAX_DEVICES];
    cudaMemPool_t device_pools[FM_MAX_DEVICES];  /* created on first use */
} fm_state;

extern PyModuleDef fm_module_def;

static inline fm_state *fm_state_of_module(PyObject *module)
{
    return (fm_state *)PyModule_GetState(module);
}

/* Our types are final (no Py_TPFLAGS_BASETYPE), so an instance's type is
 * always the heap type that was created with the module. */
static inline fm_state *fm_state_of_type(PyTypeObject *type)
{
    return (fm_state *)PyType_GetModuleState(type);
}

static inline fm_state *fm_state_of(PyObject *self)
{
    return fm_state_of_type(Py_TYPE(self));
}

/* ---- errors.c ---------------------------------------------------------- */

/* Dealloc functions may run while an exception is set; they keep it. */
typedef struct fm_saved_error {
    PyObject *type, *value, *traceback;
} fm_saved_error;

static inline fm_saved_error fm_error_save(void)
{
    fm_saved_error e;
    PyErr_Fetch(&e.type, &e.value, &e.traceback);
    return e;
}

static inline void fm_error_restore(fm_saved_error e)
{
    PyErr_Restore(e.type, e.value, e.traceback);
}

/* Raises fastmog.CudaError for `err`, naming the operation (printf-style).
 * Always returns NULL so callers can `return fm_cuda_error(...)`. */
PyObject *fm_cuda_error(fm_state *st, cudaError_t err, const char *op_fmt, ...);

/* Same, returning -1 for int-returning helpers. */
int fm_cuda_fail(fm_state *st, cudaError_t err, const char *op_fmt, ...);

/* Checks `err`; on failure raises and returns -1. */
#define FM_CUDA_CHECK(st, call, ...)                                         \
    do {                                                                     \
        cudaError_t fm_err_ = (call);                                        \
        if (fm_err_ != cudaSuccess)                                          \
            return fm_cuda_fail((st), fm_err_, __VA_ARGS__);                 \
    } while (0)

/* ---- device.c ---------------------------------------------------------- */

/* Restores the calling thread's current device on exit from an operation. */
typedef struct fm_device_guard {
    int previous;
    int changed;
} fm_device_guard;

int fm_device_enter(fm_state *st, int device, fm_device_guard *guard);
void fm_device_exit(fm_device_guard *guard);

/* Resolves a `device=` argument (None: the current device) and checks that
 * it exists. */
int fm_resolve_device(fm_state *st, PyObject *arg, int *device);

/* Waits for `stream` (cudaStreamQuery polling, GIL released) so the wait
 * stays interruptible: returns -1 with KeyboardInterrupt (or CudaError) set
 * if interrupted or failed. `what` names the operation for errors. */
int fm_wait_stream(fm_state *st, cudaStream_t stream, const char *what);
int fm_wait_event(fm_state *st, cudaEvent_t event, const char *what);

/* ---- stream.c ---------------------------------------------------------- */

typedef struct fm_Stream {
    PyObject_HEAD
    cudaStream_t handle;
    int device;
    int owned;          /* created here: destroyed by close/dealloc */
    int closed;
    PyObject *owner;    /* keeps a wrapped foreign stream alive, or NULL */
} fm_Stream;

extern PyType_Spec fm_stream_spec;

/* Validates a `stream=` argument: present, a fastmog.Stream, open, and on
 * `device` (or any device when device < 0). Returns a borrowed reference. */
fm_Stream *fm_require_stream(fm_state *st, PyObject *arg, int device);

/* ---- event.c ----------------------------------------------------------- */

typedef struct fm_Event {
    PyObject_HEAD
    cudaEvent_t handle;     /* owned; NULL after close */
    int device;
    int timing;
    int recorded;
    uintptr_t recorded_on;  /* stream of the latest record(), for wait attribution */
} fm_Event;

extern PyType_Spec fm_event_spec;

/* A new Event on `device` (a new reference). */
fm_Event *fm_event_new(fm_state *st, int device, int timing);
/* Records `event` on `stream`; both must be open and on one device. */
int fm_event_record(fm_state *st, fm_Event *event, fm_Stream *stream);

/* Lifetime fences: untimed events from a per-device stack; `device` must be
 * the current device. */
int fm_fence_acquire(fm_state *st, int device, cudaEvent_t *event);
void fm_fence_release(fm_state *st, int device, cudaEvent_t event);
void fm_fences_clear(fm_state *st);

/* ---- keepalive.c ------------------------------------------------------- */

/* Keeps `obj` alive until the work queued so far on `stream` is done. */
int fm_keepalive_add(fm_state *st, fm_Stream *stream, PyObject *obj);
/* Releases the objects whose work is done. Never raises. */
void fm_keepalive_sweep(fm_state *st);
/* At module teardown: waits for each object's work, then drops it. */
void fm_keepalive_clear(fm_state *st);

/* ---- pinned.c ---------------------------------------------------------- */

/* Owner of one pinned block; numpy arrays over it have it as their base. */
typedef struct fm_PinnedBuffer {
    PyObject_HEAD
    void *ptr;          /* pinned block, owned; back to the pool in dealloc */
    size_t size;        /* block size (>= what was asked for) */
} fm_PinnedBuffer;

extern PyType_Spec fm_pinned_buffer_spec;

/* A new PinnedBuffer of at least `nbytes` bytes from the pool. */
fm_PinnedBuffer *fm_pinned_buffer_new(fm_state *st, size_t nbytes);

/* A new C-contiguous numpy array over pinned memory. Steals `descr`. */
PyObject *fm_pinned_array(fm_state *st, PyArray_Descr *descr, int ndim,
                          const npy_intp *dims);

/* 1 if `ptr` points into page-locked host memory, 0 otherwise. Never raises. */
int fm_is_pinned_ptr(const void *ptr);

void fm_pinned_pool_clear(fm_pinned_pool *pool);

/* ---- devmem.c ---------------------------------------------------------- */

#define FM_EARLIER_STREAMS_MAX 4

/* One device allocation, or a foreign one kept alive through its owner.
 * Several GpuMats (ROI views) and DLPack capsules may share it. */
typedef struct fm_DeviceBuffer {
    PyObject_HEAD
    void *ptr;
    size_t size;
    int device;
    PyObject *owner;            /* foreign memory: its owner; NULL if ours */
    fm_Stream *last_stream;     /* stream of the latest queued use, or NULL */
    /* Fences after the uses on earlier streams, each recorded when use moved
     * to another stream; identity only, never dereferenced. */
    int n_earlier;
    const fm_Stream *earlier_streams[FM_EARLIER_STREAMS_MAX];
    cudaEvent_t earlier_fences[FM_EARLIER_STREAMS_MAX];
} fm_DeviceBuffer;

extern PyType_Spec fm_device_buffer_spec;

/* Allocates `size` bytes on `device` from fastmog's stream-ordered pool.
 * `what` describes the allocation for the error message. */
fm_DeviceBuffer *fm_device_buffer_alloc(fm_state *st, int device, size_t size,
                                        const char *what);

/* Wraps foreign device memory; keeps `owner` alive (new reference taken). */
fm_DeviceBuffer *fm_device_buffer_wrap(fm_state *st, int device, void *ptr,
                                       size_t size, PyObject *owner);

/* Records that work touching the buffer is being queued on `stream`, so its
 * release is ordered after it. The buffer's device must be current. */
int fm_device_buffer_use(fm_state *st, fm_DeviceBuffer *buf, fm_Stream *stream);

/* Makes `consumer` wait (on the GPU) for every queued use of the buffer. */
int fm_device_buffer_order_before(fm_state *st, fm_DeviceBuffer *buf,
                                  cudaStream_t consumer);

void fm_device_pools_release(fm_state *st);
int fm_device_pools_trim(fm_state *st);

/* ---- gpumat.c ---------------------------------------------------------- */

typedef struct fm_GpuMat {
    PyObject_HEAD
    fm_DeviceBuffer *buffer;    /* strong reference; NULL once closed */
    char *data;                 /* first pixel of this view */
    size_t pitch;               /* bytes between rows */
    int height, width, channels;
    int ndim;                   /* 2 (H, W) or 3 (H, W, C) */
    int type_num;               /* numpy type number of the values */
    int elem_size;
    int device;
    int readonly;               /* a foreign read-only view */
    int cai_exported;           /* __cuda_array_interface__ handed out */
    int closed;
} fm_GpuMat;

extern PyType_Spec fm_gpumat_spec;

/* Creates an uninitialised GpuMat (a new reference). */
fm_GpuMat *fm_gpumat_new(fm_state *st, int device, int height, int width,
                         int channels, int ndim, int type_num);

/* Uploads a numpy array of m's shape and dtype into `m` on `stream`. */
int fm_gpumat_upload_array(fm_state *st, fm_GpuMat *m, PyObject *array,
                           const char *argname, fm_Stream *stream, PyObject *timer);

/* numpy has two numbers for some types (int32 is NPY_INT and maybe NPY_LONG):
 * the one GpuMat uses, or -1 if unsupported. */
int fm_canonical_type_num(PyArray_Descr *descr);
const char *fm_type_name(int type_num);

/* Checks that `obj` is an open GpuMat; returns it borrowed, or NULL. */
fm_GpuMat *fm_gpumat_check_open(fm_state *st, PyObject *obj, const char *argname);

/* A view sharing `buffer` (a new reference); `data` must lie inside it. */
fm_GpuMat *fm_gpumat_view(fm_state *st, fm_DeviceBuffer *buffer, char *data,
                          size_t pitch, int height, int width, int channels,
                          int ndim, int type_num, int readonly);

static inline fm_image fm_gpumat_image(const fm_GpuMat *m)
{
    fm_image img;
    img.data = m->data;
    img.pitch = m->pitch;
    img.width = m->width;
    img.height = m->height;
    img.channels = m->channels;
    img.elem_size = m->elem_size;
    return img;
}

static inline size_t fm_gpumat_row_bytes(const fm_GpuMat *m)
{
    return (size_t)m->width * (size_t)m->channels * (size_t)m->elem_size;
}

/* ---- interop.c --------------------------------------------------------- */

PyObject *fm_gpumat_cuda_array_interface(fm_GpuMat *self, void *closure);
PyObject *fm_gpumat_dlpack(fm_GpuMat *self, PyObject *args, PyObject *kwargs);
PyObject *fm_gpumat_dlpack_device(fm_GpuMat *self, PyObject *noargs);
PyObject *fm_asgpumat(PyObject *module, PyObject *args, PyObject *kwargs);

/* A GpuMat for a GpuMat (itself) or a CUDA-array/DLPack object (a view),
 * usable on `stream`. New reference. */
fm_GpuMat *fm_as_gpumat(fm_state *st, PyObject *obj, fm_Stream *stream);

/* ---- module-level helpers (module.c) ------------------------------------ */

/* Size of one pixel value for a supported numpy type number, or 0. */
int fm_supported_elem_size(int type_num);

/* ---- nvtx.c -------------------------------------------------------------- */

void fm_nvtx_init(fm_state *st);
/* Pushes a range "<name> <H>x<W>x<C>" (the size only when height > 0). */
void fm_nvtx_push(fm_state *st, const char *name, int height, int width, int channels);
void fm_nvtx_pop(fm_state *st);
extern PyMethodDef fm_nvtx_methods[];

/* ---- timer.c -------------------------------------------------------------- */

/* One timed call. Host times are CLOCK_MONOTONIC nanoseconds, the clock of
 * time.perf_counter_ns(). */
typedef struct fm_record {
    const char *name;           /* "<Type>.<method>", static */
    const char *activity;       /* what its GPU work is, static; NULL if none */
    uintptr_t stream;
    int device;
    int height, width, channels;
    int parent;                 /* index of the enclosing call, or -1 */
    int64_t host_start_ns, host_ns, waited_ns;
    cudaEvent_t start, end;     /* timing events around its GPU work, or NULL */
    double gpu_ms;              /* < 0 until resolved */
    double gpu_start_ms;        /* start, from the timer's epoch on this device */
    int n_causes;               /* earlier calls a wait was for */
    int causes[8];              /* the latest of them (indices) */
} fm_record;

struct fm_Timer {
    PyObject_HEAD
    fm_state *st;               /* borrowed: the type keeps the module alive */
    int sync, nvtx;
    fm_record *records;         /* owned array */
    size_t n, cap;
    int open;                   /* index of the innermost open call, or -1 */
    fm_event_stack events[FM_MAX_DEVICES];  /* timing events for reuse */
    /* Per device: an event recorded just before the first timed GPU work, and
     * the host time then; GPU start times are measured from it. */
    cudaEvent_t epoch[FM_MAX_DEVICES];
    int64_t epoch_host_ns[FM_MAX_DEVICES];
};

extern PyType_Spec fm_timer_spec;
extern PyMethodDef fm_timer_methods[];

/* The scope of one fastmog call: NVTX range, host time, GPU events. */
typedef struct fm_call {
    fm_Timer *timer;            /* strong reference, or NULL: not timed */
    int record;                 /* index in timer->records, or -1 */
    int nvtx;                   /* a range was pushed */
    fm_Stream *stream;          /* borrowed, or NULL for host-only calls */
    int64_t wait_start;
} fm_call;

/* Starts a call. `timer_arg` is the call's timer= argument (NULL or None:
 * the thread's active profile(), if any). Cheap when nothing is active. */
int fm_call_begin(fm_state *st, fm_call *call, const char *name, const char *activity,
                  PyObject *timer_arg, fm_Stream *stream, int height, int width, int channels);
/* Marks the start and end of the call's own GPU work on its stream (the
 * stream's device must be current). No-ops when not timed. */
int fm_call_gpu_begin(fm_state *st, fm_call *call);
int fm_call_gpu_end(fm_state *st, fm_call *call);
/* Brackets a blocking wait on the call's stream: notes how long the host
 * waited and for which earlier calls. */
void fm_call_wait_begin(fm_state *st, fm_call *call);
/* For waits on an event: the stream whose earlier calls it waits for. */
void fm_call_wait_for_stream(fm_call *call, uintptr_t stream_handle);
void fm_call_wait_end(fm_state *st, fm_call *call);
/* Ends a call: in sync mode waits for the stream, pops the NVTX range, stores
 * the host time. Returns `result` (stolen), or NULL if it was NULL or the
 * sync failed. */
PyObject *fm_call_end(fm_state *st, fm_call *call, PyObject *result);
int fm_call_end_int(fm_state *st, fm_call *call, int rc);

/* ---- mog2.c, mog2_host.c ------------------------------------------------- */

extern PyType_Spec fm_mog2_spec;
extern PyType_Spec fm_mog2_host_spec;
int fm_mog2_add_settings(PyTypeObject *type);

/* ---- nv12_host.c (issue 11): _cpu_nv12_to_bgr, _cpu_nv21_to_bgr ------------ */

extern PyMethodDef fm_nv12_host_methods[];

#endif
