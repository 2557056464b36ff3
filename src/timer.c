/* The per-call timer: host time (what cProfile sees) beside GPU time from
 * CUDA events (what Nsight sees), NVTX ranges, sync mode and wait
 * attribution. Events are recorded now and read only when asked. */
#include "fastmog.h"
#include "docstrings.h"

#include <time.h>

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- events --------------------------------------------------------------- */

static int timing_event(fm_state *st, fm_Timer *t, int device, cudaEvent_t *event)
{
    return fm_event_stack_pop(st, &t->events[device], cudaEventDefault, device, event);
}

static void give_back_event(fm_Timer *t, int device, cudaEvent_t event)
{
    fm_event_stack_push(&t->events[device], event);
}

/* ---- the call scope ---------------------------------------------------------- */

static fm_Timer *active_timer(fm_state *st, PyObject *timer_arg, int *error)
{
    *error = 0;
    if (timer_arg != NULL && timer_arg != Py_None) {
        if (!PyObject_TypeCheck(timer_arg, st->Timer_type)) {
            PyErr_Format(PyExc_TypeError, "timer must be a fastmog.Timer, not %.200s",
                         Py_TYPE(timer_arg)->tp_name);
            *error = 1;
            return NULL;
        }
        return (fm_Timer *)Py_NewRef(timer_arg);
    }
    if (st->profiles_active == 0)
        return NULL;
    PyObject *value = NULL;
    if (PyContextVar_Get(st->active_timer, NULL, &value) < 0) {
        *error = 1;
        return NULL;
    }
    if (value == NULL || value == Py_None) {
        Py_XDECREF(value);
        return NULL;
    }
    return (fm_Timer *)value;
}

int fm_call_begin(fm_state *st, fm_call *call, const char *name, const char *activity,
                  PyObject *timer_arg, fm_Stream *stream, int height, int width, int channels)
{
    call->timer = NULL;
    call->record = -1;
    call->nvtx = 0;
    call->stream = stream;
    call->wait_start = 0;
    /* The common case: nothing to record. */
    if ((timer_arg == NULL || timer_arg == Py_None) && st->profiles_active == 0
        && !st->nvtx_enabled)
        return 0;

    int error;
    fm_Timer *t = active_timer(st, timer_arg, &error);
    if (error)
        return -1;
    if (st->nvtx_enabled || (t != NULL && t->nvtx)) {
        fm_nvtx_push(st, name, height, width, channels);
        call->nvtx = 1;
    }
    if (t == NULL)
        return 0;
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 256;
        fm_record *grown = PyMem_Realloc(t->records, cap * sizeof(*grown));
        if (grown == NULL) {
            Py_DECREF(t);
            if (call->nvtx)
                fm_nvtx_pop(st);
            call->nvtx = 0;
            PyErr_NoMemory();
            return -1;
        }
        t->records = grown;
        t->cap = cap;
    }
    fm_record *r = &t->records[t->n];
    memset(r, 0, sizeof *r);
    r->name = name;
    r->activity = activity;
    r->stream = stream != NULL ? (uintptr_t)stream->handle : 0;
    r->device = stream != NULL ? stream->device : -1;
    r->height = height;
    r->width = width;
    r->channels = channels;
    r->parent = t->open;
    r->gpu_ms = -1.0;
    r->host_start_ns = now_ns();
    call->record = (int)t->n;
    t->open = call->record;
    t->n++;
    call->timer = t;
    return 0;
}

static int record_event(fm_state *st, fm_call *call, int at_end)
{
    fm_Timer *t = call->timer;
    if (t == NULL || call->stream == NULL)
        return 0;
    fm_record *r = &t->records[call->record];
    if (!at_end && t->epoch[r->device] == NULL) {
        if (timing_event(st, t, r->device, &t->epoch[r->device]) < 0)
            return -1;
        FM_CUDA_CHECK(st, cudaEventRecord(t->epoch[r->device], call->stream->handle),
                      "recording a timing event");
        t->epoch_host_ns[r->device] = now_ns();
    }
    cudaEvent_t *slot = at_end ? &r->end : &r->start;
    if (*slot == NULL && timing_event(st, t, r->device, slot) < 0)
        return -1;
    FM_CUDA_CHECK(st, cudaEventRecord(*slot, call->stream->handle), "recording a timing event");
    return 0;
}

int fm_call_gpu_begin(fm_state *st, fm_call *call)
{
    return record_event(st, call, 0);
}

int fm_call_gpu_end(fm_state *st, fm_call *call)
{
    if (call->timer == NULL || call->timer->records[call->record].start == NULL)
        return 0;
    return record_event(st, call, 1);
}

/* Earlier calls on the same stream whose GPU work is not done yet: the wait
 * is for them. Scans back until a finished call on the stream is found. */
static void note_causes(fm_Timer *t, fm_record *r, int self_index)
{
    for (int i = self_index - 1; i >= 0; i--) {
        fm_record *earlier = &t->records[i];
        if (earlier->stream != r->stream || earlier->end == NULL || earlier->gpu_ms >= 0)
            continue;
        cudaError_t err = cudaEventQuery(earlier->end);
        if (err != cudaErrorNotReady) {
            (void)cudaGetLastError();
            break;
        }
        if (r->n_causes < (int)(sizeof r->causes / sizeof r->causes[0]))
            r->causes[r->n_causes] = i;
        r->n_causes++;
    }
}

void fm_call_wait_begin(fm_state *st, fm_call *call)
{
    (void)st;
    if (call->timer == NULL)
        return;
    fm_record *r = &call->timer->records[call->record];
    note_causes(call->timer, r, call->record);
    call->wait_start = now_ns();
}

void fm_call_wait_for_stream(fm_call *call, uintptr_t stream_handle)
{
    if (call->timer != NULL)
        call->timer->records[call->record].stream = stream_handle;
}

void fm_call_wait_end(fm_state *st, fm_call *call)
{
    (void)st;
    if (call->timer == NULL || call->wait_start == 0)
        return;
    call->timer->records[call->record].waited_ns += now_ns() - call->wait_start;
    call->wait_start = 0;
}

PyObject *fm_call_end(fm_state *st, fm_call *call, PyObject *result)
{
    fm_Timer *t = call->timer;
    if (t != NULL && result != NULL && t->sync && call->stream != NULL) {
        /* Sync mode: the call returns when its own stream is done, so host
         * profilers charge the GPU time to the call that caused it. */
        fm_call_wait_begin(st, call);
        fm_device_guard guard;
        int rc = fm_device_enter(st, call->stream->device, &guard);
        if (rc == 0) {
            rc = fm_wait_stream(st, call->stream, "waiting for a call in sync mode");
            fm_device_exit(&guard);
        }
        fm_call_wait_end(st, call);
        if (rc < 0)
            Py_CLEAR(result);
    }
    if (t != NULL) {
        fm_record *r = &t->records[call->record];
        r->host_ns = now_ns() - r->host_start_ns;
        t->open = r->parent;
        Py_DECREF(t);
        call->timer = NULL;
    }
    if (call->nvtx)
        fm_nvtx_pop(st);
    call->nvtx = 0;
    return result;
}

int fm_call_end_int(fm_state *st, fm_call *call, int rc)
{
    PyObject *r = fm_call_end(st, call, rc == 0 ? Py_NewRef(Py_None) : NULL);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

/* ---- the Timer type ----------------------------------------------------------- */

static PyObject *Timer_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"sync", "nvtx", NULL};
    int sync = 0, nvtx = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|pp:Timer", kwlist, &sync, &nvtx))
        return NULL;
    PyObject *module = PyType_GetModuleByDef(type, &fm_module_def);
    if (module == NULL)
        return NULL;
    fm_Timer *self = (fm_Timer *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->st = fm_state_of_module(module);
    self->sync = sync;
    self->nvtx = nvtx;
    self->open = -1;
    return (PyObject *)self;
}

/* Reads the GPU time of every record whose events are not read yet; waits
 * (GIL released) only for work still pending. */
static int resolve(fm_Timer *t)
{
    for (size_t i = 0; i < t->n; i++) {
        fm_record *r = &t->records[i];
        if (r->gpu_ms >= 0 || r->start == NULL || r->end == NULL)
            continue;
        cudaEvent_t end = r->end;
        cudaError_t err = cudaEventQuery(end);
        if (err == cudaErrorNotReady) {
            Py_BEGIN_ALLOW_THREADS
            err = cudaEventSynchronize(end);
            Py_END_ALLOW_THREADS
            /* Another thread may have recorded (moving the array), reset or
             * resolved meanwhile: look the record up again. */
            if (i >= t->n || t->records[i].end != end)
                continue;
            r = &t->records[i];
        }
        float ms = 0.0f, start_ms = 0.0f;
        if (err == cudaSuccess)
            err = cudaEventElapsedTime(&ms, r->start, r->end);
        if (err == cudaSuccess)
            err = cudaEventElapsedTime(&start_ms, t->epoch[r->device], r->start);
        if (err != cudaSuccess)
            return fm_cuda_fail(t->st, err, "reading the GPU time of %s", r->name);
        r->gpu_ms = ms;
        r->gpu_start_ms = start_ms;
        give_back_event(t, r->device, r->start);
        give_back_event(t, r->device, r->end);
        r->start = r->end = NULL;
    }
    return 0;
}

static PyObject *Timer_raw_records(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    fm_Timer *t = (fm_Timer *)op;
    if (resolve(t) < 0)
        return NULL;
    PyObject *list = PyList_New((Py_ssize_t)t->n);
    if (list == NULL)
        return NULL;
    for (size_t i = 0; i < t->n; i++) {
        fm_record *r = &t->records[i];
        int shown = r->n_causes < 8 ? r->n_causes : 8;
        PyObject *causes = PyTuple_New(shown);
        if (causes == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        for (int k = 0; k < shown; k++)
            PyTuple_SET_ITEM(causes, k, PyLong_FromLong(r->causes[k]));
        PyObject *gpu = r->gpu_ms >= 0 ? PyFloat_FromDouble(r->gpu_ms) : Py_NewRef(Py_None);
        PyObject *gpu_start = Py_NewRef(Py_None);
        if (r->gpu_ms >= 0 && r->device >= 0) {
            Py_DECREF(gpu_start);
            gpu_start = PyLong_FromLongLong(t->epoch_host_ns[r->device]
                                            + (long long)(r->gpu_start_ms * 1e6));
        }
        PyObject *item = Py_BuildValue(
            "(szKiiiiiLLLNNNi)", r->name, r->activity, (unsigned long long)r->stream, r->device,
            r->height, r->width, r->channels, r->parent, (long long)r->host_start_ns,
            (long long)r->host_ns, (long long)r->waited_ns, gpu, gpu_start, causes, r->n_causes);
        if (item == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, item);
    }
    return list;
}

static void drop_records(fm_Timer *t)
{
    for (size_t i = 0; i < t->n; i++) {
        if (t->records[i].start != NULL)
            (void)cudaEventDestroy(t->records[i].start);
        if (t->records[i].end != NULL)
            (void)cudaEventDestroy(t->records[i].end);
    }
    t->n = 0;
    t->open = -1;
    for (int d = 0; d < FM_MAX_DEVICES; d++) {
        if (t->epoch[d] != NULL)
            (void)cudaEventDestroy(t->epoch[d]);
        t->epoch[d] = NULL;
    }
}

static PyObject *Timer_reset(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    drop_records((fm_Timer *)op);
    Py_RETURN_NONE;
}

static PyObject *Timer_host_call(PyObject *op, PyObject *args)
{
    fm_Timer *t = (fm_Timer *)op;
    PyObject *name;
    long long start_ns, host_ns;
    int h, w, c;
    if (!PyArg_ParseTuple(args, "ULL(iii):_host_call", &name, &start_ns, &host_ns, &h, &w, &c))
        return NULL;
    /* Records hold plain C names; the set keeps each name's text alive. */
    if (t->names == NULL && (t->names = PySet_New(NULL)) == NULL)
        return NULL;
    const char *text = PyUnicode_AsUTF8(name);
    if (text == NULL || PySet_Add(t->names, name) < 0)
        return NULL;
    fm_call call;
    if (fm_call_begin(t->st, &call, text, NULL, op, NULL, h, w, c) < 0)
        return NULL;
    if (call.nvtx)
        fm_nvtx_pop(t->st);  /* the caller has its own range */
    call.nvtx = 0;
    fm_record *r = &t->records[call.record];
    r->host_start_ns = start_ns;
    t->open = r->parent;
    r->host_ns = host_ns;
    Py_DECREF(call.timer);
    Py_RETURN_NONE;
}

static PyObject *Timer_get_sync(PyObject *op, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(((fm_Timer *)op)->sync);
}

static int Timer_set_sync(PyObject *op, PyObject *value, void *Py_UNUSED(closure))
{
    int v = value ? PyObject_IsTrue(value) : -1;
    if (v < 0)
        return -1;
    ((fm_Timer *)op)->sync = v;
    return 0;
}

static PyObject *Timer_get_nvtx(PyObject *op, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(((fm_Timer *)op)->nvtx);
}

static PyObject *Timer_len(PyObject *op, void *Py_UNUSED(closure))
{
    return PyLong_FromSize_t(((fm_Timer *)op)->n);
}

static void Timer_dealloc(PyObject *op)
{
    fm_Timer *t = (fm_Timer *)op;
    PyTypeObject *tp = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    drop_records(t);
    Py_CLEAR(t->names);
    PyMem_Free(t->records);
    for (int d = 0; d < FM_MAX_DEVICES; d++)
        fm_event_stack_clear(&t->events[d]);
    tp->tp_free(op);
    Py_DECREF(tp);
}

static int Timer_traverse(PyObject *op, visitproc visit, void *arg)
{
    Py_VISIT(((fm_Timer *)op)->names);
    Py_VISIT(Py_TYPE(op));
    return 0;
}

static PyMethodDef Timer_methods[] = {
    {"_raw_records", Timer_raw_records, METH_NOARGS, FM_DOC_TIMER_RECORDS},
    {"reset", Timer_reset, METH_NOARGS, FM_DOC_TIMER_RESET},
    {"_host_call", Timer_host_call, METH_VARARGS, FM_DOC_TIMER_HOST_CALL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Timer_getset[] = {
    {"sync", Timer_get_sync, Timer_set_sync,
     "Whether each call waits for its own stream before returning (sync mode).", NULL},
    {"nvtx", Timer_get_nvtx, NULL, "Whether timed calls also emit NVTX ranges.", NULL},
    {"call_count", Timer_len, NULL, "Calls recorded so far.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot Timer_slots[] = {
    {Py_tp_new, Timer_new},
    {Py_tp_dealloc, Timer_dealloc},
    {Py_tp_traverse, Timer_traverse},
    {Py_tp_methods, Timer_methods},
    {Py_tp_getset, Timer_getset},
    {Py_tp_doc, (void *)"Records of timed fastmog calls (the base of fastmog.Timer)."},
    {0, NULL},
};

PyType_Spec fm_timer_spec = {
    .name = "fastmog._fastmog._Timer",
    .basicsize = sizeof(fm_Timer),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_BASETYPE,
    .slots = Timer_slots,
};

/* ---- profile() support -------------------------------------------------------- */

static PyObject *profile_enter(PyObject *module, PyObject *timer)
{
    fm_state *st = fm_state_of_module(module);
    if (!PyObject_TypeCheck(timer, st->Timer_type)) {
        PyErr_SetString(PyExc_TypeError, "expected a fastmog.Timer");
        return NULL;
    }
    PyObject *token = PyContextVar_Set(st->active_timer, timer);
    if (token != NULL)
        st->profiles_active++;
    return token;
}

static PyObject *profile_exit(PyObject *module, PyObject *token)
{
    fm_state *st = fm_state_of_module(module);
    if (PyContextVar_Reset(st->active_timer, token) < 0)
        return NULL;
    st->profiles_active--;
    Py_RETURN_NONE;
}

static PyObject *current_timer(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    fm_state *st = fm_state_of_module(module);
    PyObject *value = NULL;
    if (PyContextVar_Get(st->active_timer, Py_None, &value) < 0)
        return NULL;
    return value;
}

PyMethodDef fm_timer_methods[] = {
    {"_profile_enter", profile_enter, METH_O, "Makes `timer` active in this context."},
    {"_profile_exit", profile_exit, METH_O, "Undoes _profile_enter(token)."},
    {"active_timer", current_timer, METH_NOARGS,
     "active_timer($module, /)\n--\n\nThe Timer of the innermost profile() block, or None."},
    {NULL, NULL, 0, NULL},
};
