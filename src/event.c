/* fastmog.Event: a CUDA event to record, wait for and time. */
#include "fastmog.h"
#include "docstrings.h"

/* Fills a new Event and creates its handle; `device` is the current one. */
static int event_create(fm_state *st, fm_Event *self, int device, int timing)
{
    self->handle = NULL;
    self->device = device;
    self->timing = timing;
    self->recorded = 0;
    self->recorded_mark = -1;
    cudaError_t err = cudaEventCreateWithFlags(
        &self->handle, timing ? cudaEventDefault : cudaEventDisableTiming);
    if (err != cudaSuccess) {
        self->handle = NULL;
        return fm_cuda_fail(st, err, "creating an event on device %d", device);
    }
    return 0;
}

fm_Event *fm_event_new(fm_state *st, int device, int timing)
{
    fm_device_guard guard;
    if (fm_device_enter(st, device, &guard) < 0)
        return NULL;
    fm_Event *self = (fm_Event *)st->Event_type->tp_alloc(st->Event_type, 0);
    /* Dropped inside the guard: with no handle, dealloc makes no CUDA call. */
    if (self != NULL && event_create(st, self, device, timing) < 0)
        Py_CLEAR(self);
    fm_device_exit(&guard);
    return self;
}

static PyObject *Event_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"timing", "device", NULL};
    fm_state *st = fm_state_of_type(type);
    int timing = 1, device;
    PyObject *device_arg = Py_None;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$pO:Event", kwlist,
                                     &timing, &device_arg))
        return NULL;
    if (fm_resolve_device(st, device_arg, &device) < 0)
        return NULL;
    return (PyObject *)fm_event_new(st, device, timing);
}

static fm_Event *open_event(PyObject *op)
{
    fm_Event *self = (fm_Event *)op;
    if (self->handle == NULL) {
        PyErr_SetString(PyExc_ValueError, "event is closed");
        return NULL;
    }
    return self;
}

fm_Event *fm_require_event(fm_state *st, PyObject *arg, const char *argname)
{
    if (!Py_IS_TYPE(arg, st->Event_type)) {
        PyErr_Format(PyExc_TypeError, "%s must be a fastmog.Event, not %.200s", argname,
                     Py_TYPE(arg)->tp_name);
        return NULL;
    }
    return open_event(arg);
}

int fm_event_record(fm_state *st, fm_Event *event, fm_Stream *stream)
{
    fm_device_guard guard;
    if (stream->device != event->device) {
        PyErr_Format(PyExc_ValueError,
                     "event is on device %d but the stream is on device %d",
                     event->device, stream->device);
        return -1;
    }
    if (fm_device_enter(st, event->device, &guard) < 0)
        return -1;
    cudaError_t err = cudaEventRecord(event->handle, stream->handle);
    fm_device_exit(&guard);
    if (err != cudaSuccess)
        return fm_cuda_fail(st, err, "recording an event");
    event->recorded = 1;
    event->recorded_on = (uintptr_t)stream->handle;
    event->recorded_mark = fm_timer_mark(st);
    return 0;
}

static PyObject *Event_record(PyObject *op, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"stream", NULL};
    PyObject *stream_arg = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$O:record", kwlist, &stream_arg))
        return NULL;
    fm_Event *self = open_event(op);
    if (self == NULL)
        return NULL;
    fm_state *st = fm_state_of(op);
    fm_Stream *stream = fm_require_stream(st, stream_arg, -1);
    if (stream == NULL || fm_event_record(st, self, stream) < 0)
        return NULL;
    return Py_NewRef(op);
}

static PyObject *Event_synchronize(PyObject *op, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"timer", NULL};
    PyObject *timer = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$O:synchronize", kwlist, &timer))
        return NULL;
    fm_Event *self = open_event(op);
    if (self == NULL)
        return NULL;
    self->busy++;  /* close() from another thread must not destroy the handle */
    PyObject *result = fm_synchronize(fm_state_of(op), "Event.synchronize", timer, NULL,
                                      self->device, self->handle, self->recorded_on);
    self->busy--;
    return result;
}

static PyObject *Event_query(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    fm_Event *self = open_event(op);
    return self != NULL ? fm_query(fm_state_of(op), self->device, NULL, self->handle) : NULL;
}

static PyObject *Event_elapsed_time(PyObject *op, PyObject *arg)
{
    fm_state *st = fm_state_of(op);
    fm_Event *self = open_event(op), *end = self ? fm_require_event(st, arg, "end") : NULL;
    if (end == NULL)
        return NULL;
    if (!self->timing || !end->timing) {
        PyErr_SetString(PyExc_ValueError,
                        "elapsed_time needs two events created with timing=True");
        return NULL;
    }
    if (!self->recorded || !end->recorded) {
        PyErr_SetString(PyExc_ValueError, "both events must be recorded first");
        return NULL;
    }
    float ms = 0.0f;
    fm_device_guard guard;
    if (fm_device_enter(st, self->device, &guard) < 0)
        return NULL;
    cudaError_t err = cudaEventElapsedTime(&ms, self->handle, end->handle);
    fm_device_exit(&guard);
    if (err == cudaErrorNotReady) {
        PyErr_SetString(PyExc_ValueError,
                        "the events are not complete yet: synchronize the end event first");
        return NULL;
    }
    if (err != cudaSuccess)
        return fm_cuda_error(st, err, "measuring the time between two events");
    return PyFloat_FromDouble((double)ms);
}

static void event_close(fm_Event *self)
{
    if (self->handle == NULL)
        return;
    int previous;
    /* cudaEventDestroy returns at once; a pending record completes first. */
    if (cudaGetDevice(&previous) == cudaSuccess) {
        if (previous != self->device)
            (void)cudaSetDevice(self->device);
        (void)cudaEventDestroy(self->handle);
        if (previous != self->device)
            (void)cudaSetDevice(previous);
    }
    self->handle = NULL;
}

static PyObject *Event_close(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    if (((fm_Event *)op)->busy) {
        PyErr_SetString(PyExc_ValueError, "the event is being waited for in another thread");
        return NULL;
    }
    event_close((fm_Event *)op);
    Py_RETURN_NONE;
}

static PyObject *Event_enter(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    if (open_event(op) == NULL)
        return NULL;
    return Py_NewRef(op);
}

static PyObject *Event_exit(PyObject *op, PyObject *Py_UNUSED(args))
{
    return Event_close(op, NULL);
}

static PyObject *Event_get_closed(PyObject *op, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(((fm_Event *)op)->handle == NULL);
}

static PyObject *Event_get_device(PyObject *op, void *Py_UNUSED(closure))
{
    return PyLong_FromLong(((fm_Event *)op)->device);
}

static PyObject *Event_get_timing(PyObject *op, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(((fm_Event *)op)->timing);
}

static PyObject *Event_repr(PyObject *op)
{
    fm_Event *self = (fm_Event *)op;
    if (self->handle == NULL)
        return PyUnicode_FromString("<fastmog.Event closed>");
    return PyUnicode_FromFormat("<fastmog.Event device=%d timing=%s%s>", self->device,
                                self->timing ? "True" : "False",
                                self->recorded ? "" : " unrecorded");
}

static void Event_dealloc(PyObject *op)
{
    PyTypeObject *tp = Py_TYPE(op);
    event_close((fm_Event *)op);
    tp->tp_free(op);
    Py_DECREF(tp);
}

static PyMethodDef Event_methods[] = {
    {"record", (PyCFunction)(void (*)(void))Event_record,
     METH_VARARGS | METH_KEYWORDS, FM_DOC_EVENT_RECORD},
    {"synchronize", (PyCFunction)(void (*)(void))Event_synchronize,
     METH_VARARGS | METH_KEYWORDS, FM_DOC_EVENT_SYNCHRONIZE},
    {"query", Event_query, METH_NOARGS, FM_DOC_EVENT_QUERY},
    {"elapsed_time", Event_elapsed_time, METH_O, FM_DOC_EVENT_ELAPSED_TIME},
    {"close", Event_close, METH_NOARGS, "close($self, /)\n--\n\nReleases the event. Idempotent."},
    {"__enter__", Event_enter, METH_NOARGS, NULL},
    {"__exit__", Event_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Event_getset[] = {
    {"closed", Event_get_closed, NULL, "True once close() has run.", NULL},
    {"device", Event_get_device, NULL, "The CUDA device of this event.", NULL},
    {"timing", Event_get_timing, NULL, "Whether elapsed_time() works on it.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot Event_slots[] = {
    {Py_tp_new, Event_new},
    {Py_tp_dealloc, Event_dealloc},
    {Py_tp_repr, Event_repr},
    {Py_tp_methods, Event_methods},
    {Py_tp_getset, Event_getset},
    {Py_tp_doc, (void *)FM_DOC_EVENT},
    {0, NULL},
};

PyType_Spec fm_event_spec = {
    .name = "fastmog.Event",
    .basicsize = sizeof(fm_Event),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = Event_slots,
};
