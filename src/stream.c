/* fastmog.Stream: an owned or wrapped CUDA stream.
 *
 * THE RULE, owned here: a stream's handle is valid from the moment a call
 * checks it until the call returns.
 * - A call that may release the GIL between checking its stream and queuing
 *   its last work (a wait, pageable staging, a pinned allocation, the
 *   subtractor's lock, a producer's __dlpack__ or __cuda_array_interface__)
 *   holds the stream: fm_stream_hold() ... fm_stream_unhold(). Holding a
 *   closed or closing stream is a ValueError, so no work is ever queued on a
 *   NULL handle (the legacy default stream).
 * - close() refuses with ValueError while the stream is held; a wait in
 *   progress (synchronize(), a blocking download) holds it too.
 * - A stream that is closing is as good as closed: every method and every
 *   stream= argument refuses it; a second close() waits for the first and
 *   then returns (close is idempotent).
 * - close() waits for the queued work (interruptibly, GIL released) before
 *   destroying the handle: fences recorded on it stay valid either way, and
 *   devmem.c keeps the events, never the stream.
 * Shown by tests/robustness/test_lifetimes_gpu.py (test_close_races_*) and
 * tests/robustness/test_stress_gpu.py. */
#include "fastmog.h"
#include "docstrings.h"

#include <structmember.h>
#include <time.h>

static fm_Stream *stream_alloc(PyTypeObject *type)
{
    fm_Stream *self = (fm_Stream *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->handle = NULL;
    self->device = -1;
    self->owned = 0;
    self->closed = 1;   /* until a handle is attached */
    self->closing = 0;
    self->uses = 0;
    self->serial = ++fm_state_of_type(type)->next_stream_serial;
    self->owner = NULL;
    return self;
}

/* A Stream over a handle that already exists and that it does not own: the
 * legacy default stream or a wrapped one. */
static fm_Stream *stream_over(PyTypeObject *type, cudaStream_t handle, int device)
{
    fm_Stream *self = stream_alloc(type);
    if (self == NULL)
        return NULL;
    self->handle = handle;
    self->device = device;
    self->closed = 0;
    return self;
}

static PyObject *Stream_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"device", "priority", "non_blocking", NULL};
    fm_state *st = fm_state_of_type(type);
    PyObject *device_arg = Py_None, *priority_arg = NULL;
    int priority = 0, non_blocking = 1;
    int device, least, greatest;
    fm_device_guard guard = {0, 0};
    fm_Stream *self = NULL;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$OO!p:Stream", kwlist, &device_arg,
                                     &PyLong_Type, &priority_arg, &non_blocking))
        return NULL;
    if (priority_arg != NULL) {
        /* Any int is a question about the range; one past int is outside it. */
        int overflow;
        long value = PyLong_AsLongAndOverflow(priority_arg, &overflow);
        if (overflow || value < INT_MIN || value > INT_MAX) {
            PyErr_Format(PyExc_ValueError,
                         "priority=%R is outside every device's range (small ints; lower "
                         "numbers run first)", priority_arg);
            return NULL;
        }
        priority = (int)value;
    }
    if (fm_resolve_device(st, device_arg, &device) < 0)
        return NULL;
    if (fm_device_enter(st, device, &guard) < 0)
        return NULL;
    self = stream_alloc(type);
    if (self == NULL)
        goto error;
    cudaError_t err = cudaDeviceGetStreamPriorityRange(&least, &greatest);
    if (err != cudaSuccess) {
        fm_cuda_error(st, err, "reading the stream priority range of device %d", device);
        goto error;
    }
    if (priority < greatest || priority > least) {
        PyErr_Format(PyExc_ValueError,
                     "priority=%d is outside device %d's range [%d, %d] "
                     "(lower numbers run first)", priority, device, greatest, least);
        goto error;
    }
    err = cudaStreamCreateWithPriority(
        &self->handle, non_blocking ? cudaStreamNonBlocking : cudaStreamDefault,
        priority);
    if (err != cudaSuccess) {
        fm_cuda_error(st, err, "creating a stream on device %d", device);
        goto error;
    }
    self->device = device;
    self->owned = 1;
    self->closed = 0;
    fm_device_exit(&guard);
    return (PyObject *)self;

error:
    fm_device_exit(&guard);
    Py_XDECREF(self);
    return NULL;
}

static PyObject *Stream_null(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"device", NULL};
    fm_state *st = fm_state_of_type(type);
    PyObject *device_arg = Py_None;
    int device;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$O:null", kwlist, &device_arg))
        return NULL;
    if (fm_resolve_device(st, device_arg, &device) < 0)
        return NULL;
    return (PyObject *)stream_over(type, cudaStreamLegacy, device);
}

/* Reads a stream handle out of a foreign object: an int, the
 * __cuda_stream__ protocol, PyTorch's .cuda_stream or CuPy's .ptr. */
static int foreign_stream_handle(PyObject *obj, uintptr_t *handle)
{
    PyObject *value = NULL;

    if (PyLong_Check(obj) && !PyBool_Check(obj)) {
        value = Py_NewRef(obj);
    }
    else if (PyObject_HasAttrString(obj, "__cuda_stream__")) {
        PyObject *proto = PyObject_GetAttrString(obj, "__cuda_stream__");
        if (proto == NULL)
            return -1;
        PyObject *pair = PyCallable_Check(proto) ? PyObject_CallNoArgs(proto)
                                                 : Py_NewRef(proto);
        Py_DECREF(proto);
        if (pair == NULL)
            return -1;
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_Format(PyExc_TypeError,
                         "%.200s.__cuda_stream__ must give a (version, handle) tuple", Py_TYPE(obj)->tp_name);
            Py_DECREF(pair);
            return -1;
        }
        value = Py_NewRef(PyTuple_GET_ITEM(pair, 1));
        Py_DECREF(pair);
    }
    else if (PyObject_HasAttrString(obj, "cuda_stream")) {
        value = PyObject_GetAttrString(obj, "cuda_stream");
    }
    else if (PyObject_HasAttrString(obj, "ptr")) {
        value = PyObject_GetAttrString(obj, "ptr");
    }
    else {
        PyErr_Format(PyExc_TypeError,
                     "cannot wrap %.200s as a stream: expected an int handle or an object "
                     "with __cuda_stream__ (CuPy, PyTorch, cuda.core)", Py_TYPE(obj)->tp_name);
        return -1;
    }
    if (value == NULL)
        return -1;
    if (!PyLong_Check(value)) {
        PyErr_Format(PyExc_TypeError, "stream handle must be an int, not %.200s", Py_TYPE(value)->tp_name);
        Py_DECREF(value);
        return -1;
    }
    *handle = (uintptr_t)PyLong_AsUnsignedLongLong(value);
    Py_DECREF(value);
    if (PyErr_Occurred()) {
        PyErr_SetString(PyExc_ValueError, "stream handle must be a non-negative int");
        return -1;
    }
    return 0;
}

/* The driver calls below, by their signatures (CUresult is an int, a
 * CUcontext a pointer): fastmog links the runtime only. */
typedef int (*stream_get_ctx_fn)(cudaStream_t stream, void **context);
typedef int (*ctx_push_fn)(void *context);
typedef int (*ctx_pop_fn)(void **context);
typedef int (*ctx_get_device_fn)(int *device);

/* The device a foreign stream belongs to. cudaStreamGetDevice is CUDA 12.8's
 * (runtime, and a driver of 12.8 or later); before that, and on older drivers
 * under a CUDA 12 build, the stream's context, made current for a moment,
 * names its device (driver calls through fm_driver_function). */
static cudaError_t stream_device_from_context(cudaStream_t handle, int *device)
{
    void *get_ctx, *push, *pop, *get_device;
    cudaError_t err;
    if ((err = fm_driver_function("cuStreamGetCtx", 9020, &get_ctx)) != cudaSuccess
        || (err = fm_driver_function("cuCtxPushCurrent", 4000, &push)) != cudaSuccess
        || (err = fm_driver_function("cuCtxPopCurrent", 4000, &pop)) != cudaSuccess
        || (err = fm_driver_function("cuCtxGetDevice", 2000, &get_device)) != cudaSuccess)
        return err;
    void *ctx = NULL, *popped = NULL;
    if (((stream_get_ctx_fn)get_ctx)(handle, &ctx) != 0 || ctx == NULL)
        return cudaErrorInvalidResourceHandle;
    if (((ctx_push_fn)push)(ctx) != 0)
        return cudaErrorInvalidResourceHandle;
    int rc = ((ctx_get_device_fn)get_device)(device);
    /* restores the caller's context; a failure leaves the thread's wrong */
    if (((ctx_pop_fn)pop)(&popped) != 0)
        return cudaErrorInvalidResourceHandle;
    return rc == 0 ? cudaSuccess : cudaErrorInvalidDevice;
}

static cudaError_t stream_device(cudaStream_t handle, int *device)
{
#if CUDART_VERSION >= 12080
    cudaError_t err = cudaStreamGetDevice(handle, device);
    if (err != cudaErrorCallRequiresNewerDriver && err != cudaErrorNotSupported)
        return err;
    (void)cudaGetLastError();
#endif
    return stream_device_from_context(handle, device);
}

static PyObject *Stream_wrap(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"", "device", NULL};
    fm_state *st = fm_state_of_type(type);
    PyObject *obj, *device_arg = Py_None;
    uintptr_t raw;
    int device;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$O:wrap", kwlist, &obj, &device_arg))
        return NULL;
    if (Py_IS_TYPE(obj, st->Stream_type))
        return Py_NewRef(obj);
    if (foreign_stream_handle(obj, &raw) < 0)
        return NULL;
    cudaStream_t handle = (cudaStream_t)raw;
    if (raw == 0)
        handle = cudaStreamLegacy;
    if (handle == cudaStreamLegacy || handle == cudaStreamPerThread
        || device_arg != Py_None) {
        if (fm_resolve_device(st, device_arg, &device) < 0)
            return NULL;
    }
    else {
        cudaError_t err = stream_device(handle, &device);
        if (err != cudaSuccess)
            return fm_cuda_error(st, err, "finding the device of stream %p", (void *)raw);
    }
    fm_Stream *self = stream_over(type, handle, device);
    if (self != NULL && !PyLong_Check(obj))
        self->owner = Py_NewRef(obj);
    return (PyObject *)self;
}

static fm_Stream *open_stream(PyObject *op)
{
    fm_Stream *self = (fm_Stream *)op;
    if (self->closed || self->closing) {
        PyErr_SetString(PyExc_ValueError, "stream is closed");
        return NULL;
    }
    return self;
}

/* Parses a method's arguments as PyArg_ParseTupleAndKeywords does, then checks
 * that the stream is open: bad arguments are reported before a closed stream.
 * Returns self (borrowed), or NULL with an exception set. */
static fm_Stream *parse_open(PyObject *op, PyObject *args, PyObject *kwargs, const char *format,
                             char **kwlist, ...)
{
    va_list targets;
    va_start(targets, kwlist);
    int parsed = PyArg_VaParseTupleAndKeywords(args, kwargs, format, kwlist, targets);
    va_end(targets);
    return parsed ? open_stream(op) : NULL;
}

/* The open stream's raw handle as an int, what .handle and __cuda_stream__
 * hand out. New reference, or NULL (closed). */
static PyObject *handle_int(PyObject *op)
{
    fm_Stream *self = open_stream(op);
    return self != NULL ? PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)self->handle)
                        : NULL;
}

static PyObject *Stream_synchronize(PyObject *op, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"timer", NULL};
    PyObject *timer = NULL;
    fm_Stream *self = parse_open(op, args, kwargs, "|$O:synchronize", kwlist, &timer);
    if (self == NULL)
        return NULL;
    return fm_synchronize(fm_state_of(op), "Stream.synchronize", timer, self, self->device,
                          NULL, 0);
}

static PyObject *Stream_query(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    fm_Stream *self = open_stream(op);
    return self != NULL ? fm_query(fm_state_of(op), self->device, self->handle, NULL) : NULL;
}

static PyObject *Stream_wait(PyObject *op, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"", "timer", NULL};
    PyObject *event_arg, *timer = NULL;
    fm_Stream *self = parse_open(op, args, kwargs, "O|$O:wait", kwlist, &event_arg, &timer);
    if (self == NULL)
        return NULL;
    fm_state *st = fm_state_of(op);
    fm_Event *event = fm_require_event(st, event_arg, "event");
    if (event == NULL)
        return NULL;
    fm_device_guard guard;
    fm_call call;
    if (fm_call_begin(st, &call, "Stream.wait", "wait", timer, self, 0, 0, 0) < 0)
        return NULL;
    if (fm_device_enter(st, self->device, &guard) < 0)
        return fm_call_end(st, &call, NULL);
    /* Timed, its GPU window is the time the stream waits: the next call's
     * "queued behind", charged to the record that recorded the event. */
    fm_call_behind(&call, event->recorded_on, event->recorded_mark);
    if (fm_call_gpu_begin(st, &call) < 0) {
        fm_device_exit(&guard);
        return fm_call_end(st, &call, NULL);
    }
    cudaError_t err = cudaStreamWaitEvent(self->handle, event->handle, 0);
    if (err == cudaSuccess && fm_call_gpu_end(st, &call) < 0) {
        fm_device_exit(&guard);
        return fm_call_end(st, &call, NULL);
    }
    fm_device_exit(&guard);
    if (err != cudaSuccess)
        return fm_call_end(st, &call, fm_cuda_error(st, err, "making a stream wait for an event"));
    return fm_call_end(st, &call, Py_NewRef(Py_None));
}

static PyObject *Stream_record(PyObject *op, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"event", NULL};
    PyObject *event_arg = Py_None;
    fm_Event *event = NULL;
    fm_Stream *self = parse_open(op, args, kwargs, "|O:record", kwlist, &event_arg);
    if (self == NULL)
        return NULL;
    fm_state *st = fm_state_of(op);
    if (event_arg == Py_None)
        event = fm_event_new(st, self->device, 1);
    else if ((event = fm_require_event(st, event_arg, "event")) != NULL)
        Py_INCREF(event);
    if (event == NULL)
        return NULL;
    if (fm_event_record(st, event, self) < 0) {
        Py_DECREF(event);
        return NULL;
    }
    return (PyObject *)event;
}

/* A second close() waits for the first (GIL released, interruptibly). */
static int wait_for_other_close(fm_Stream *self)
{
    while (self->closing) {
        Py_BEGIN_ALLOW_THREADS
        const struct timespec nap = {0, 200000};  /* 200 us */
        nanosleep(&nap, NULL);
        Py_END_ALLOW_THREADS
        if (PyErr_CheckSignals() < 0)
            return -1;
    }
    return 0;
}

/* Waits for queued work (GIL released), then drops the handle, by the rule
 * at the top. `wait` is 0 only from dealloc, when nothing can hold it. */
static int stream_close(fm_state *st, fm_Stream *self, int wait)
{
    if (self->closing && wait_for_other_close(self) < 0)
        return -1;
    if (self->closed)
        return 0;
    if (self->uses > 0) {
        PyErr_SetString(PyExc_ValueError,
                        "the stream is in use by another call (being waited for in another "
                        "thread, staging, or waiting for a subtractor's lock): close it after "
                        "that call returns");
        return -1;
    }
    int rc = 0;
    fm_device_guard guard = {0, 0};
    if (fm_device_enter(st, self->device, &guard) < 0)
        return -1;
    self->closing = 1;
    /* From here every other call refuses the stream; the wait releases the
     * GIL. */
    if (wait && fm_wait_stream(st, self, "waiting for a stream before closing it") < 0) {
        if (!PyErr_ExceptionMatches(st->CudaError)) {
            /* Interrupted: the stream stays open. */
            self->closing = 0;
            fm_device_exit(&guard);
            return -1;
        }
        rc = -1;  /* a broken stream is closed all the same */
    }
    if (self->owned) {
        /* The runtime releases the stream once its queued work is done. */
        cudaError_t err = cudaStreamDestroy(self->handle);
        if (err != cudaSuccess && rc == 0)
            rc = fm_cuda_fail(st, err, "destroying a stream");
    }
    fm_device_exit(&guard);
    self->closed = 1;
    self->closing = 0;
    self->handle = NULL;
    Py_CLEAR(self->owner);
    return rc;
}

static PyObject *Stream_close(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    if (stream_close(fm_state_of(op), (fm_Stream *)op, 1) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *Stream_enter(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    if (open_stream(op) == NULL)
        return NULL;
    return Py_NewRef(op);
}

static PyObject *Stream_exit(PyObject *op, PyObject *Py_UNUSED(args))
{
    return Stream_close(op, NULL);
}

static PyObject *Stream_cuda_stream(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    PyObject *handle = handle_int(op);
    return handle != NULL ? Py_BuildValue("(iN)", 0, handle) : NULL;
}

static PyObject *Stream_get_handle(PyObject *op, void *Py_UNUSED(closure))
{
    return handle_int(op);
}

static PyObject *Stream_get_closed(PyObject *op, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(((fm_Stream *)op)->closed);
}

static PyObject *Stream_get_is_null(PyObject *op, void *Py_UNUSED(closure))
{
    fm_Stream *self = (fm_Stream *)op;
    return PyBool_FromLong(!self->closed && self->handle == cudaStreamLegacy);
}

static PyObject *Stream_repr(PyObject *op)
{
    fm_Stream *self = (fm_Stream *)op;
    if (self->closed)
        return PyUnicode_FromString("<fastmog.Stream closed>");
    const char *kind = self->handle == cudaStreamLegacy ? "legacy default"
                       : self->owned ? "owned" : "wrapped";
    return PyUnicode_FromFormat("<fastmog.Stream %s %p device=%d>", kind,
                                (void *)self->handle, self->device);
}

static int Stream_traverse(PyObject *op, visitproc visit, void *arg)
{
    Py_VISIT(((fm_Stream *)op)->owner);
    Py_VISIT(Py_TYPE(op));
    return 0;
}

static int Stream_clear(PyObject *op)
{
    Py_CLEAR(((fm_Stream *)op)->owner);
    return 0;
}

static void Stream_dealloc(PyObject *op)
{
    fm_Stream *self = (fm_Stream *)op;
    PyTypeObject *tp = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    if (!self->closed) {
        /* Nothing can refer to the stream any more, so no wait is needed:
         * the runtime finishes queued work before releasing it. */
        fm_saved_error saved = fm_error_save();
        if (stream_close(fm_state_of(op), self, 0) < 0)
            PyErr_WriteUnraisable(op);
        fm_error_restore(saved);
    }
    Stream_clear(op);
    tp->tp_free(op);
    Py_DECREF(tp);
}

static PyMethodDef Stream_methods[] = {
    {"null", (PyCFunction)(void (*)(void))Stream_null,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS, FM_DOC_STREAM_NULL},
    {"wrap", (PyCFunction)(void (*)(void))Stream_wrap,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS, FM_DOC_STREAM_WRAP},
    {"synchronize", (PyCFunction)(void (*)(void))Stream_synchronize,
     METH_VARARGS | METH_KEYWORDS, FM_DOC_STREAM_SYNCHRONIZE},
    {"query", Stream_query, METH_NOARGS, FM_DOC_STREAM_QUERY},
    {"wait", (PyCFunction)(void (*)(void))Stream_wait, METH_VARARGS | METH_KEYWORDS,
     FM_DOC_STREAM_WAIT},
    {"record", (PyCFunction)(void (*)(void))Stream_record,
     METH_VARARGS | METH_KEYWORDS, FM_DOC_STREAM_RECORD},
    {"close", Stream_close, METH_NOARGS, FM_DOC_STREAM_CLOSE},
    {"__enter__", Stream_enter, METH_NOARGS, NULL},
    {"__exit__", Stream_exit, METH_VARARGS, NULL},
    {"__cuda_stream__", Stream_cuda_stream, METH_NOARGS, FM_DOC_STREAM_CUDA_STREAM},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef Stream_members[] = {
    {"device", T_INT, offsetof(fm_Stream, device), READONLY,
     "The CUDA device this stream belongs to."},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef Stream_getset[] = {
    {"handle", Stream_get_handle, NULL, "The raw cudaStream_t as an int.", NULL},
    {"closed", Stream_get_closed, NULL, "True once close() has run.", NULL},
    {"is_null", Stream_get_is_null, NULL, "True for the legacy default stream.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot Stream_slots[] = {
    {Py_tp_new, Stream_new},
    {Py_tp_dealloc, Stream_dealloc},
    {Py_tp_traverse, Stream_traverse},
    {Py_tp_clear, Stream_clear},
    {Py_tp_repr, Stream_repr},
    {Py_tp_methods, Stream_methods},
    {Py_tp_members, Stream_members},
    {Py_tp_getset, Stream_getset},
    {Py_tp_doc, (void *)FM_DOC_STREAM},
    {0, NULL},
};

PyType_Spec fm_stream_spec = {
    .name = "fastmog.Stream",
    .basicsize = sizeof(fm_Stream),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = Stream_slots,
};
