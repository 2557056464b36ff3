/* Internal header of the _fastmog extension: module state, object layouts and
 * what each source file offers the others, section by section. Nothing here
 * is public API.
 *
 * Ownership conventions: functions returning PyObject* return a new reference
 * unless documented as borrowed; on failure they return NULL with an exception
 * set. Functions returning int return 0 on success and -1 with an exception
 * set on failure. Functions that queue GPU work expect the device of their
 * stream to be current: each public entry point enters it once. */
#ifndef FASTMOG_INTERNAL_H
#define FASTMOG_INTERNAL_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pythread.h>
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

/* Fences of one pending release: every stream a buffer was used on, and
 * the release itself. */
#define FM_EARLIER_STREAMS_MAX 4
#define FM_RELEASE_FENCES_MAX (FM_EARLIER_STREAMS_MAX + 1)

/* An object kept alive until the GPU work recorded by its events is done. */
typedef struct fm_pending_release {
    cudaEvent_t events[FM_RELEASE_FENCES_MAX];
    int n_events;
    int device;
    uint64_t stream;                /* fm_Stream.serial of the one stream its events
                                     * were recorded on (never reused), or 0 */
    uint64_t serial;                /* fm_keepalive.next_serial when it was added */
    PyObject *obj;                  /* strong reference */
} fm_pending_release;

typedef struct fm_keepalive {
    fm_pending_release *items;      /* owned array */
    size_t n, cap;
    uint64_t next_serial;
} fm_keepalive;

/* Events without timing, reused (fences, timing events of the timer). */
typedef struct fm_event_stack {
    cudaEvent_t *events;            /* owned array of owned events */
    size_t n, cap;
} fm_event_stack;

typedef struct fm_Timer fm_Timer;
typedef struct fm_Stream fm_Stream;

typedef struct fm_state {
    PyTypeObject *Stream_type;
    PyTypeObject *Event_type;
    PyTypeObject *GpuMat_type;
    PyTypeObject *DeviceBuffer_type;
    PyTypeObject *PinnedBuffer_type;
    PyTypeObject *MOG2Base_type;
    PyTypeObject *MOG2_type;
    PyTypeObject *MOG2Cpu_type;
    PyObject *CudaError;

    PyTypeObject *Timer_type;
    PyObject *active_timer;         /* contextvars.ContextVar of fastmog.profile() */
    int profiles_active;            /* profile() blocks open in any thread */
    int nvtx_enabled;               /* set_nvtx(True) or FASTMOG_NVTX=1 */
    void *nvtx_domain;              /* nvtxDomainHandle_t of the "fastmog" domain */
    /* The last range's message and what it was made from: a loop's calls
     * repeat one name and shape, so most ranges skip the formatting. */
    struct fm_nvtx_message { char name[96]; int height, width, channels; char text[160]; }
        nvtx_last;

    fm_pinned_pool pinned;
    fm_keepalive keepalive;
    fm_event_stack fences[FM_MAX_DEVICES];
    cudaMemPool_t device_pools[FM_MAX_DEVICES];  /* created on first use */
    uint64_t next_stream_serial;    /* fm_Stream.serial of the next stream */
    void *mem_get_address_range;    /* the driver's cuMemGetAddressRange, found
                                       on first use (interop.c) */
    size_t components_rows;         /* regions the last connected_components found:
                                       rows read with the count next time */
    struct fm_gates {               /* gate.c: made on first use, freed with the module */
        uint32_t *word;             /* pinned, mapped; raised to each opened ticket */
        void *wait_value;           /* the driver's cuStreamWaitValue32 */
        uint32_t next;              /* the next ticket */
        int unavailable;            /* the driver has no stream memory operations */
    } gates;
} fm_state;

extern PyModuleDef fm_module_def;

static inline fm_state *fm_state_of_module(PyObject *module)
{
    return (fm_state *)PyModule_GetState(module);
}

/* Every type of ours is created with the module (subclasses of _MOG2Base
 * too), so an instance's type finds the module state. */
static inline fm_state *fm_state_of_type(PyTypeObject *type)
{
    return (fm_state *)PyType_GetModuleState(type);
}

static inline fm_state *fm_state_of(PyObject *self)
{
    return fm_state_of_type(Py_TYPE(self));
}

/* The dealloc of a GC-tracked heap type whose `release` frees everything the
 * object owns: untrack, release, free, then drop the type. */
static inline void fm_gc_dealloc(PyObject *op, int (*release)(PyObject *))
{
    PyTypeObject *tp = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    (void)release(op);
    tp->tp_free(op);
    Py_DECREF(tp);
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

/* Waits for a stream or an event (cudaXxxQuery polling, GIL released) so the
 * wait stays interruptible: -1 with KeyboardInterrupt (or CudaError) set if
 * interrupted or failed. `what` names the operation for errors. */
int fm_wait_stream(fm_state *st, fm_Stream *stream, const char *what);
int fm_wait_event(fm_state *st, cudaEvent_t event, const char *what);
/* The driver's function `name` as of CUDA `version` (11070 for 11.7), found
 * through the runtime (fastmog links no libcuda): cudaSuccess with *fn set,
 * else why not (cudaErrorSymbolNotFound: this driver has none). Never raises. */
cudaError_t fm_driver_function(const char *name, unsigned version, void **fn);
/* CLOCK_MONOTONIC in ns (time.perf_counter's clock on Linux); when this
 * thread's last wait saw its work done, before taking the GIL back (0 if it
 * failed). */
int64_t fm_monotonic_ns(void);
int64_t fm_wait_done_ns(void);

/* Stream.query and Event.query: True when the work is done, False while it
 * runs, CudaError else; asks `event`, or `stream` when event is NULL. */
PyObject *fm_query(fm_state *st, int device, cudaStream_t stream, cudaEvent_t event);

extern PyMethodDef fm_device_methods[];

/* ---- stream.c ---------------------------------------------------------- */

struct fm_Stream {
    PyObject_HEAD
    cudaStream_t handle;
    int device;
    int owned;          /* created here: destroyed by close/dealloc */
    int closed;
    int closing;        /* close() is waiting for it: as good as closed */
    int uses;           /* calls holding it (fm_stream_hold): close() refuses */
    uint64_t serial;    /* never reused: what fences are keyed by */
    PyObject *owner;    /* keeps a wrapped foreign stream alive, or NULL */
};

extern PyType_Spec fm_stream_spec;

/* The checks below are inline, here with the struct they read: every file
 * that takes a stream= uses them, and as functions of stream.c they would
 * tie the timer and the waits back to the Stream type in a call circle. */

/* Validates a `stream=` argument: present, a fastmog.Stream, open, and on
 * `device` (or any device when device < 0). Returns a borrowed reference. */
static inline fm_Stream *fm_require_stream(fm_state *st, PyObject *arg, int device)
{
    if (arg == NULL || arg == Py_None) {
        PyErr_SetString(PyExc_TypeError,
                        "stream= is required: pass fastmog.Stream() for a new stream, or "
                        "fastmog.Stream.null() for the legacy default stream");
        return NULL;
    }
    if (!Py_IS_TYPE(arg, st->Stream_type)) {
        PyErr_Format(PyExc_TypeError,
                     "stream= must be a fastmog.Stream, not %.200s; wrap a CuPy, "
                     "PyTorch or raw CUDA stream with fastmog.Stream.wrap(s)",
                     Py_TYPE(arg)->tp_name);
        return NULL;
    }
    fm_Stream *stream = (fm_Stream *)arg;
    if (stream->closed || stream->closing) {
        PyErr_SetString(PyExc_ValueError, "stream is closed");
        return NULL;
    }
    if (device >= 0 && stream->device != device) {
        PyErr_Format(PyExc_ValueError, "stream is on device %d but the data is on device %d",
                     stream->device, device);
        return NULL;
    }
    return stream;
}

/* The rule of stream.c: a call that may release the GIL (a wait, staging, a
 * lock, a producer's Python code) between checking its stream and queuing
 * work holds the stream; close() refuses while it is held. Hold: ValueError
 * if the stream is closed or closing; takes a reference. Unhold: drops it. */
static inline int fm_stream_hold(fm_Stream *stream)
{
    if (stream->closed || stream->closing) {
        PyErr_SetString(PyExc_ValueError, "stream is closed");
        return -1;
    }
    stream->uses++;
    Py_INCREF(stream);
    return 0;
}

static inline void fm_stream_unhold(fm_Stream *stream)
{
    stream->uses--;
    Py_DECREF(stream);
}

/* ---- event.c ----------------------------------------------------------- */

typedef struct fm_Event {
    PyObject_HEAD
    cudaEvent_t handle;     /* owned; NULL after close */
    int device;
    int timing;
    int recorded;
    int busy;               /* calls inside a wait on it: close() refuses */
    uintptr_t recorded_on;  /* stream of the latest record(), for wait attribution */
    int recorded_mark;      /* the active timer's record count then (fm_timer_mark) */
} fm_Event;

extern PyType_Spec fm_event_spec;

/* A new Event on `device` (a new reference). */
fm_Event *fm_event_new(fm_state *st, int device, int timing);
/* Checks that `arg` is an open fastmog.Event (`argname` names it in the
 * TypeError); returns it borrowed, or NULL. */
fm_Event *fm_require_event(fm_state *st, PyObject *arg, const char *argname);
/* Records `event` on `stream`; both must be open and on one device. */
int fm_event_record(fm_state *st, fm_Event *event, fm_Stream *stream);

/* ---- keepalive.c: what the GPU may still use ----------------------------- */

/* A stack of reusable events, the one implementation behind the fences and
 * the timer's timing events. Pop creates an event with `flags` when empty
 * (`device` current, named in errors); push caches it (or destroys it). */
int fm_event_stack_pop(fm_state *st, fm_event_stack *stack, unsigned flags, int device,
                       cudaEvent_t *event);
void fm_event_stack_push(fm_event_stack *stack, cudaEvent_t event);
/* Destroys every cached event and the array. */
void fm_event_stack_clear(fm_event_stack *stack);

/* Lifetime fences: untimed events from a per-device stack; `device` must be
 * the current device. */
int fm_fence_acquire(fm_state *st, int device, cudaEvent_t *event);
void fm_fence_release(fm_state *st, int device, cudaEvent_t event);
void fm_fences_clear(fm_state *st);

/* Makes `consumer` wait on the GPU for the work queued so far on `producer`
 * (nothing when they are the same stream). The device must be current. */
int fm_stream_order(fm_state *st, int device, cudaStream_t producer, cudaStream_t consumer);

/* Keeps `obj` alive until the work queued so far on `stream` is done. */
int fm_keepalive_add(fm_state *st, fm_Stream *stream, PyObject *obj);
/* Keeps `obj` alive until every one of `n` fences (recorded events from the
 * fence stack of `device`, owned from here on, returned to it when done) has
 * completed. Never fails: with no memory left it waits for the fences. */
void fm_keepalive_add_fences(fm_state *st, int device, const cudaEvent_t *fences, int n,
                             PyObject *obj);
/* Releases the objects whose work is done. Never raises. */
void fm_keepalive_sweep(fm_state *st);
/* Where the list stands: taken before a wait, for the sweep after it. */
uint64_t fm_keepalive_mark(fm_state *st);
/* fm_keepalive_sweep after a wait, begun at `mark`, that found `stream` done:
 * what was kept for work queued on that stream before then is released
 * without asking the GPU, which a sweep does with an event query per item
 * (a few us, where a sync-mode call is about to return). Never raises. */
void fm_keepalive_sweep_after_wait(fm_state *st, const fm_Stream *stream, uint64_t mark);
/* At module teardown: waits for each object's work, then drops it. */
void fm_keepalive_clear(fm_state *st);

/* ---- gate.c: a stream waits until the host has submitted what follows --- */

typedef struct fm_gate {
    uint32_t ticket;
    int closed;             /* a wait is queued that only fm_gate_open ends */
} fm_gate;

/* Queues on `stream` (its device current) a wait that lasts until
 * fm_gate_open(gate). Where the driver cannot, queues nothing and leaves
 * gate->closed 0. A closed gate must be opened on every path before the
 * caller returns, or the stream waits forever. */
int fm_gate_close(fm_state *st, cudaStream_t stream, fm_gate *gate);
/* Lets the GPU past the gate; nothing when it is not closed. Never fails. */
void fm_gate_open(fm_state *st, fm_gate *gate);
/* At module teardown: frees the gates' word. */
void fm_gates_clear(fm_state *st);

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

/* 1 if the bytes from `first` to `last` lie in page-locked host memory. */
int fm_is_pinned_range(const void *first, const void *last);

void fm_pinned_pool_clear(fm_pinned_pool *pool);

extern PyMethodDef fm_pinned_methods[];

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
    int anchor;                 /* the timer's anchor its times are read from, or -1 */
    int64_t anchor_host_ns;     /* that anchor's host time, once the record is read */
    double gpu_start_ms;        /* start, from the anchor */
    int n_causes;               /* earlier calls a wait was for */
    int causes[8];              /* the latest of them (indices) */
    /* Recorded before the cross-stream waits the call inserts (producer
     * order, earlier uses of shared memory): [queued, start] is the time its
     * stream spent behind other streams, outside its own GPU window. */
    cudaEvent_t queued;
    double queued_ms;           /* queued, from the anchor; < 0 if none */
    int behind;                 /* the record whose work a GPU wait was for, or -1 */
    uintptr_t behind_stream;    /* the stream that wait was for, or 0 */
    int session;                /* decoder session of a decode record, or -1 */
    int64_t wait_start_ns;      /* host time the first blocking wait began, or 0 */
    int64_t gil_ns;             /* of waited_ns, the time after the GPU work was done:
                                 * taking the GIL back from other Python threads */
    /* Bytes the call's GPU work reads and writes, by fastmog's own count
     * (frames, masks, the model: see fm_mog2_bytes). */
    int64_t bytes_read, bytes_written;
    /* Host time the call's GPU work was handed to CUDA (fm_call_gpu_submitted):
     * on a stream the GPU reached before then, the window holds the wait for
     * the host, and the analysis takes it out (profiling/_probes.py). */
    int64_t submitted_ns;
    int gated;                  /* the window opened behind a gate (gate.c): the GPU
                                 * reached it only once the work was submitted */
    int done;                   /* the call has ended: no more events will be recorded */
    int ended;                  /* `end` was recorded (it is taken before `start` is) */
} fm_record;

struct fm_Timer {
    PyObject_HEAD
    fm_state *st;               /* borrowed: the type keeps the module alive */
    int sync, nvtx;
    fm_record *records;         /* owned array */
    size_t n, cap;
    size_t reclaimed;           /* records before this one have given their events back */
    int open;                   /* index of the innermost open call, or -1 */
    fm_event_stack events[FM_MAX_DEVICES];  /* timing events for reuse */
    /* Anchors put GPU times on the host's clock (timer.c): owned array, a
     * slot whose event is NULL is free; current[d] is device d's latest,
     * or -1. */
    struct fm_anchor { cudaEvent_t event; int64_t host_ns; int device, users; } *anchors;
    int n_anchors, cap_anchors;
    int current[FM_MAX_DEVICES];
    PyObject *names;            /* names of host calls recorded from Python: a
                                   set that keeps their text alive; or NULL */
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
    int drained;                /* the call waited for its stream after its last
                                 * queued work: sync mode need not wait again */
} fm_call;

/* Starts a call. `timer_arg` is the call's timer= argument (NULL or None:
 * the thread's active profile(), if any). Cheap when nothing is active. */
int fm_call_begin(fm_state *st, fm_call *call, const char *name, const char *activity,
                  PyObject *timer_arg, fm_Stream *stream, int height, int width, int channels);
/* Marks the start and end of the call's own GPU work on its stream (the
 * stream's device must be current). No-ops when not timed. */
int fm_call_gpu_begin(fm_state *st, fm_call *call);
int fm_call_gpu_end(fm_state *st, fm_call *call);
/* The call's first GPU operation is handed to CUDA: a kernel's launch once
 * it returns (a call of several launches says so after the first; gpu_end
 * does for the others); a copy right before its call, because a large copy
 * reaches the GPU while its call still runs (in an NVDEC pipeline, the time
 * after the call over-counted the host's part of a 12 MB device copy by
 * about 7 us). */
void fm_call_gpu_submitted(fm_call *call);
/* Marks the point before the cross-stream waits a call is about to insert on
 * its stream (the device must be current). No-op when not timed. */
int fm_call_gpu_queue(fm_state *st, fm_call *call);
/* The call's stream is made to wait (on the GPU) for an event recorded on
 * `stream` when the timer held `mark` records (-1: unknown): notes the record
 * it waits behind. */
void fm_call_behind(fm_call *call, uintptr_t stream, int mark);
/* The bytes the call's GPU work reads and writes (added up). */
static inline void fm_call_bytes(fm_call *call, int64_t read, int64_t written);
/* The active timer's record count (a mark for fm_call_behind), or -1 when no
 * timer is active. Cheap when none is. */
int fm_timer_mark(fm_state *st);
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

static inline void fm_call_bytes(fm_call *call, int64_t read, int64_t written)
{
    if (call->timer != NULL) {
        call->timer->records[call->record].bytes_read += read;
        call->timer->records[call->record].bytes_written += written;
    }
}

/* Stream.synchronize and Event.synchronize as one timed call (synchronize.c):
 * waits for `event`, or for `stream` when `event` is NULL, interruptibly. */
PyObject *fm_synchronize(fm_state *st, const char *name, PyObject *timer, fm_Stream *stream,
                         int device, cudaEvent_t event, uintptr_t recorded_on);

/* ---- hostarray.c: dtypes, image shapes, host images ----------------------- */

/* A value type fastmog stores, with its name in each protocol. */
typedef struct fm_dtype {
    int type_num;           /* numpy's canonical number */
    const char *name;       /* "uint8" */
    int itemsize;
    char kind;              /* 'u', 'i' or 'f', as in a typestr */
    uint8_t dl_code;        /* DLPack's type code */
} fm_dtype;

/* The entry for a canonical type number, or NULL if unsupported. */
const fm_dtype *fm_dtype_of(int type_num);
const char *fm_dtype_name(int type_num);
/* Bytes per value, or 0 if unsupported. */
int fm_dtype_size(int type_num);
/* Canonical type numbers (numpy has two for some types), -1 if unsupported. */
int fm_dtype_from_descr(PyArray_Descr *descr);
int fm_dtype_from_dlpack(uint8_t code, uint8_t bits, uint16_t lanes);

/* Bit masks over type numbers and channel counts, for fm_image_rule. */
#define FM_DTYPE_BIT(type_num) (1u << (type_num))
#define FM_CHANNELS_BIT(c) (1u << (c))
#define FM_IMAGE_CHANNELS (FM_CHANNELS_BIT(1) | FM_CHANNELS_BIT(3) | FM_CHANNELS_BIT(4))

/* The shape of an image, on the host or the device. */
typedef struct fm_image_shape {
    int height, width, channels;
    int ndim;               /* 2 (H, W) or 3 (H, W, C) */
    int type_num;
    int readonly;
} fm_image_shape;

/* Builds a shape from numpy-style dimensions, refusing what no image can be
 * (not 2-D or 3-D, empty, more channels than 4, sizes the kernels cannot
 * index, an unsupported dtype). Two channels pass here (a chroma plane);
 * a GpuMat holds 1, 3 or 4 (fm_image_rule with FM_IMAGE_CHANNELS). */
int fm_image_shape_make(int ndim, const int64_t *dims, int type_num, const char *argname,
                        fm_image_shape *out);

/* What an operation accepts: zero fields accept anything. */
typedef struct fm_image_rule {
    unsigned dtypes;        /* FM_DTYPE_BIT of each accepted type */
    unsigned channels;      /* FM_CHANNELS_BIT of each accepted count */
    int height, width;      /* must match when > 0 */
    const char *like;       /* what height and width come from, for messages */
    int writable;
    int max_height;         /* > 0: taller images are refused */
} fm_image_rule;

/* What a GpuMat can hold: any dtype of the table, 1, 3 or 4 channels. */
extern const fm_image_rule fm_gpumat_rule;

/* Checks `shape` against `rule`: TypeError for a dtype, ValueError else. */
int fm_image_rule_check(const fm_image_rule *rule, const fm_image_shape *shape,
                        const char *argname);

/* A numpy array seen as an image: rows `pitch` bytes apart, contiguous
 * pixels within a row, values aligned to their size. */
typedef struct fm_host_image {
    fm_image_shape shape;
    char *data;
    size_t pitch;
    PyObject *array;        /* borrowed */
} fm_host_image;

int fm_host_image_check(PyObject *obj, const char *argname, const fm_image_rule *rule,
                        fm_host_image *out);
/* 1 if the image's whole extent is page-locked. Never raises. */
int fm_host_image_pinned(const fm_host_image *img);
/* Copies a host image's rows into a packed buffer (GIL released if large). */
void fm_host_image_pack(const fm_host_image *img, void *dst);
/* A fresh C-contiguous pinned numpy array of `shape` (ndim as given). */
PyObject *fm_host_image_new_pinned(fm_state *st, const fm_image_shape *shape);

static inline size_t fm_image_row_bytes(const fm_image_shape *s)
{
    return (size_t)s->width * (size_t)s->channels * (size_t)fm_dtype_size(s->type_num);
}

/* ---- devmem.c ---------------------------------------------------------- */

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
     * to another stream, keyed by the stream's serial (never reused; 0: a
     * consumer's raw handle, never matched). */
    int n_earlier;
    uint64_t earlier_streams[FM_EARLIER_STREAMS_MAX];
    cudaEvent_t earlier_fences[FM_EARLIER_STREAMS_MAX];
} fm_DeviceBuffer;

extern PyType_Spec fm_device_buffer_spec;

/* Allocates `size` bytes on `device` (current) from fastmog's stream-ordered
 * pool. `what` describes the allocation for the error message. */
fm_DeviceBuffer *fm_device_buffer_alloc(fm_state *st, int device, size_t size,
                                        const char *what);

/* Wraps foreign device memory; keeps `owner` alive (new reference taken). */
fm_DeviceBuffer *fm_device_buffer_wrap(fm_state *st, int device, void *ptr,
                                       size_t size, PyObject *owner);

/* How a use on a stream is ordered against the buffer's earlier uses. */
enum fm_use {
    FM_USE_RELEASE_AFTER = 0,   /* only the release waits for it */
    FM_USE_AFTER_EARLIER = 1,   /* and it waits, on the GPU, for earlier uses */
};

/* "This buffer is used by work about to be queued on `stream`": its release
 * is ordered after that work, and with FM_USE_AFTER_EARLIER the work is
 * ordered after every earlier use on other streams. The one place that owns
 * the ordering rule. The buffer's device must be current. */
int fm_device_buffer_use(fm_state *st, fm_DeviceBuffer *buf, fm_Stream *stream,
                         enum fm_use how);

/* A consumer that was handed the memory on stream `consumer` (a DLPack
 * export) is done with it once the work queued there so far is: the release
 * waits for that too. */
int fm_device_buffer_consumer_done(fm_state *st, fm_DeviceBuffer *buf, cudaStream_t consumer);

/* Makes a foreign stream wait (on the GPU) for every queued use. */
int fm_device_buffer_order_before(fm_state *st, fm_DeviceBuffer *buf, cudaStream_t consumer);

void fm_device_pools_release(fm_state *st);

extern PyMethodDef fm_devmem_methods[];

/* ---- gpumat.c ---------------------------------------------------------- */

typedef struct fm_GpuMat {
    PyObject_HEAD
    fm_DeviceBuffer *buffer;    /* strong reference; NULL once closed */
    char *data;                 /* first pixel of this view */
    size_t pitch;               /* bytes between rows */
    fm_image_shape shape;
    int device;
    int cai_exported;           /* __cuda_array_interface__ handed out */
    int closed;
} fm_GpuMat;

extern PyType_Spec fm_gpumat_spec;

/* An uninitialised GpuMat of `shape` on `device` (current). */
fm_GpuMat *fm_gpumat_new(fm_state *st, int device, const fm_image_shape *shape);

/* A view sharing `buffer`; `data` must lie inside it. */
fm_GpuMat *fm_gpumat_view(fm_state *st, fm_DeviceBuffer *buffer, char *data, size_t pitch,
                          const fm_image_shape *shape);

/* Checks that `obj` is an open GpuMat; returns it borrowed, or NULL. Inline:
 * the protocol exports of GpuMat (interop_export.c) use it too. */
static inline fm_GpuMat *fm_gpumat_check_open(fm_state *st, PyObject *obj, const char *argname)
{
    if (!Py_IS_TYPE(obj, st->GpuMat_type)) {
        PyErr_Format(PyExc_TypeError, "%s must be a fastmog.GpuMat, not %.200s", argname,
                     Py_TYPE(obj)->tp_name);
        return NULL;
    }
    fm_GpuMat *m = (fm_GpuMat *)obj;
    if (m->closed) {
        PyErr_Format(PyExc_ValueError, "%s is a closed GpuMat", argname);
        return NULL;
    }
    return m;
}

/* A device-to-device copy, in three steps so that a caller can time several
 * as one span (a decoder's output copy): copy_pair checks that `dst_arg`
 * (named `dst_name` in errors) is an open, writable GpuMat of src_arg's
 * shape, dtype and device and returns src (borrowed, *dst set) or NULL;
 * copy_use orders both buffers' release after `stream`; copy_queue queues
 * the copy there (the device current) and adds its bytes to `call`. */
fm_GpuMat *fm_gpumat_copy_pair(fm_state *st, PyObject *src_arg, PyObject *dst_arg,
                               const char *dst_name, fm_GpuMat **dst);
int fm_gpumat_copy_use(fm_state *st, fm_GpuMat *src, fm_GpuMat *dst, fm_Stream *stream);
int fm_gpumat_copy_queue(fm_state *st, fm_GpuMat *src, fm_GpuMat *dst, fm_Stream *stream,
                         fm_call *call);

/* ValueError unless `m` is on `device`. */
int fm_check_same_device(const fm_GpuMat *m, int device, const char *argname);

/* An operation's result image: the caller's out= (`out_arg`, Py_None when not
 * given) checked against `rule` and `device`, or a new GpuMat of `shape` on
 * `device`. New reference, or NULL with an exception. */
fm_GpuMat *fm_gpumat_out(fm_state *st, PyObject *out_arg, const fm_image_rule *rule,
                         int device, const fm_image_shape *shape);

static inline fm_image fm_gpumat_image(const fm_GpuMat *m)
{
    fm_image img;
    img.data = m->data;
    img.pitch = m->pitch;
    img.width = m->shape.width;
    img.height = m->shape.height;
    img.channels = m->shape.channels;
    img.elem_size = fm_dtype_size(m->shape.type_num);
    return img;
}

/* ---- interop_export.c: GpuMat's memory for other libraries ---------------- */

PyObject *fm_gpumat_cuda_array_interface(PyObject *self, void *closure);
PyObject *fm_gpumat_dlpack(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *fm_gpumat_dlpack_device(PyObject *self, PyObject *noargs);

/* ---- interop_import.c: other libraries' device memory as a GpuMat --------- */

/* A view of a producer's device memory, `stream` ordered after the
 * producer's work; keeps the producer alive. New reference. */
fm_GpuMat *fm_view_device_array(fm_state *st, PyObject *obj, const char *argname,
                                fm_Stream *stream);

/* ---- transfer.c: copies between host and device ----------------------------- */

/* Queues host-to-device into `dst` (same shape); keeps the source (or a
 * pinned staging copy) alive until the copy is done. */
int fm_upload(fm_state *st, fm_GpuMat *dst, const fm_host_image *src, fm_Stream *stream,
              enum fm_use how, fm_call *call);

/* Queues device-to-host into `dst` (or a new pinned array when dst is NULL);
 * with `blocking`, waits for it. Returns the host array. */
PyObject *fm_download(fm_state *st, fm_GpuMat *src, const fm_host_image *dst, int blocking,
                      fm_Stream *stream, fm_call *call);

/* ---- front_door.c: what the user passed, as a device image ------------------- */

/* Turns what the user passed (a GpuMat, a numpy array, any producer's device
 * memory) into a device image on `stream`'s device, checked against `rule`
 * before anything is queued. A numpy array is uploaded (a nested timed call)
 * into `*staging` (owned by the caller; NULL: a new image each time), re-made
 * only when the shape changes. The device
 * must be current. New reference. */
fm_GpuMat *fm_as_device_image(fm_state *st, PyObject *obj, const char *argname,
                              const fm_image_rule *rule, fm_Stream *stream,
                              fm_GpuMat **staging, PyObject *timer);

/* The height, width and channels of a numpy array or GpuMat argument, for
 * naming a call before its input is checked; zeros when unknown. */
void fm_peek_shape(fm_state *st, PyObject *obj, int *height, int *width, int *channels);

extern PyMethodDef fm_transfer_methods[];

/* ---- mog2_base.c, mog2_params.c, mog2_args.c, mog2.c, mog2_cpu.c ------------ */

extern PyType_Spec fm_mog2_base_spec;
extern PyType_Spec fm_mog2_spec;
extern PyType_Spec fm_mog2_cpu_spec;
extern PyMethodDef fm_mog2_params_methods[];     /* _mog2_parameters */
extern PyMethodDef fm_mog2_methods_module[];       /* apply_cameras */
extern PyMethodDef fm_mog2_cpu_methods_module[];   /* _cpu_apply_cameras */

/* Creates a subtractor type deriving from `base`, its docstring opening with
 * the signature built from the parameter table (mog2_params.c; `extra`:
 * parameters after them, or NULL). */
PyTypeObject *fm_mog2_make_type(PyObject *module, PyType_Spec *spec, PyTypeObject *base,
                                const char *extra);

/* ---- nv12.c, nv12_cpu.c: NV12/NV21 to BGR on the GPU and on the host ------ */

extern PyMethodDef fm_nv12_methods[];
extern PyMethodDef fm_nv12_cpu_methods[];

/* ---- morphology.c; morphology_cpu.c, components_cpu.c: the motion step ---- */

extern PyMethodDef fm_morphology_methods[];
extern PyMethodDef fm_morphology_cpu_methods[];
extern PyMethodDef fm_components_cpu_methods[];
extern PyMethodDef fm_components_methods[];


#endif
