/* The per-call timer: host time (what cProfile sees) beside GPU time from
 * CUDA events (what Nsight sees), NVTX ranges, sync mode and wait
 * attribution. Events are recorded now and read only when asked. */
#include "fastmog.h"
#include "docstrings.h"

#include <time.h>

static int64_t now_ns(void)
{
    return fm_monotonic_ns();
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
    call->drained = 0;
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
    r->queued_ms = -1.0;
    r->anchor = -1;
    r->behind = -1;
    r->session = -1;
    r->host_start_ns = now_ns();
    call->record = (int)t->n;
    t->open = call->record;
    t->n++;
    call->timer = t;
    return 0;
}

static void reclaim(fm_Timer *t, int device);

/* ---- anchors: GPU times on the host's clock ------------------------------------
 * An anchor is an event recorded on a stream with nothing queued, so the GPU
 * takes it as soon as it is submitted, and the host time then. A record's
 * GPU times are read from the anchor current when it began: on the host's
 * clock they show when the GPU reached the call (CallRecord.gpu_start) and
 * whether it got there before the host had submitted the work
 * (profiling/_probes.py takes that wait out). The GPU's clock drifts from
 * the host's (13 ppm on an H100: benchmarks/event_latency.py), and elapsed
 * times are floats, so a new anchor is taken every FM_ANCHOR_NS; one that no
 * unread record needs goes back to the event stack. */
#define FM_ANCHOR_NS 50000000LL

static void release_anchor(fm_Timer *t, int a)
{
    struct fm_anchor *anchor = &t->anchors[a];
    if (--anchor->users > 0 || t->current[anchor->device] == a)
        return;
    give_back_event(t, anchor->device, anchor->event);
    anchor->event = NULL;
}

static int new_anchor(fm_state *st, fm_Timer *t, int device)
{
    int a = 0;
    while (a < t->n_anchors && t->anchors[a].event != NULL)
        a++;
    if (a == t->cap_anchors) {
        int cap = t->cap_anchors ? 2 * t->cap_anchors : 8;
        struct fm_anchor *grown = PyMem_Realloc(t->anchors, (size_t)cap * sizeof *grown);
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        t->anchors = grown;
        t->cap_anchors = cap;
    }
    cudaEvent_t event;
    cudaStream_t idle;
    if (timing_event(st, t, device, &event) < 0)
        return -1;
    cudaError_t err = cudaStreamCreateWithFlags(&idle, cudaStreamNonBlocking);
    if (err == cudaSuccess) {
        err = cudaEventRecord(event, idle);
        int64_t host_ns = now_ns();
        /* released once the event has run; nothing waits for it */
        cudaError_t destroyed = cudaStreamDestroy(idle);
        if (err == cudaSuccess)
            err = destroyed;
        t->anchors[a] = (struct fm_anchor){event, host_ns, device, 0};
    }
    if (err != cudaSuccess) {
        give_back_event(t, device, event);
        if (a < t->n_anchors)
            t->anchors[a].event = NULL;
        return fm_cuda_fail(st, err, "recording the timer's clock anchor");
    }
    if (a == t->n_anchors)
        t->n_anchors++;
    int old = t->current[device];
    t->current[device] = a;
    if (old >= 0 && t->anchors[old].users == 0) {
        give_back_event(t, device, t->anchors[old].event);
        t->anchors[old].event = NULL;
    }
    return 0;
}

/* Gives record `r` the device's current anchor, taking a new one when it is
 * older than FM_ANCHOR_NS. */
static int anchor_record(fm_state *st, fm_Timer *t, fm_record *r)
{
    if (r->anchor >= 0)
        return 0;
    int a = t->current[r->device];
    if ((a < 0 || r->host_start_ns - t->anchors[a].host_ns > FM_ANCHOR_NS)
        && new_anchor(st, t, r->device) < 0)
        return -1;
    r->anchor = t->current[r->device];
    t->anchors[r->anchor].users++;
    return 0;
}

int fm_call_gpu_queue(fm_state *st, fm_call *call)
{
    fm_Timer *t = call->timer;
    if (t == NULL || call->stream == NULL)
        return 0;
    fm_record *r = &t->records[call->record];
    if (r->queued != NULL || r->start != NULL)
        return 0;
    if (anchor_record(st, t, r) < 0
        || timing_event(st, t, r->device, &t->records[call->record].queued) < 0)
        return -1;
    r = &t->records[call->record];
    FM_CUDA_CHECK(st, cudaEventRecord(r->queued, call->stream->handle),
                  "recording a timing event");
    return 0;
}

/* Everything the window needs is taken before its start is recorded: between
 * the start event and the first launch (and between the last launch and the
 * end event) the host does nothing the GPU could count as the call's time.
 * Events come back from read records after the end event (fm_call_gpu_end),
 * while the GPU works: on a stream with nothing queued the host's time before
 * the launch is the call's latency, and reading records costs a query and
 * two elapsed-time calls each. */
/* The anchor and the events of the call's window, taken once. */
static int gpu_prepare(fm_state *st, fm_call *call)
{
    fm_Timer *t = call->timer;
    fm_record *r = &t->records[call->record];
    if (anchor_record(st, t, r) < 0
        || (r->start == NULL && timing_event(st, t, r->device, &r->start) < 0)
        || (r->end == NULL && timing_event(st, t, r->device, &r->end) < 0))
        return -1;
    return 0;
}

int fm_call_gpu_begin(fm_state *st, fm_call *call)
{
    fm_Timer *t = call->timer;
    if (t == NULL || call->stream == NULL)
        return 0;
    if (gpu_prepare(st, call) < 0)
        return -1;
    FM_CUDA_CHECK(st, cudaEventRecord(t->records[call->record].start, call->stream->handle),
                  "recording a timing event");
    return 0;
}

void fm_call_gpu_submitted(fm_call *call)
{
    fm_Timer *t = call->timer;
    if (t != NULL && t->records[call->record].submitted_ns == 0)
        t->records[call->record].submitted_ns = now_ns();
}

/* The end event, after the call's work. */
static int gpu_record_end(fm_state *st, fm_call *call)
{
    fm_Timer *t = call->timer;
    fm_call_gpu_submitted(call);
    fm_record *r = &t->records[call->record];
    FM_CUDA_CHECK(st, cudaEventRecord(r->end, call->stream->handle),
                  "recording a timing event");
    r->ended = 1;
    return 0;
}

/* Events back from read records, once the stack runs low. */
static void reclaim_if_low(fm_Timer *t, int device)
{
    if (t->events[device].n < 16)
        reclaim(t, device);
}

int fm_call_gpu_end(fm_state *st, fm_call *call)
{
    fm_Timer *t = call->timer;
    if (t == NULL || call->stream == NULL || t->records[call->record].start == NULL)
        return 0;
    if (gpu_record_end(st, call) < 0)
        return -1;
    reclaim_if_low(t, t->records[call->record].device);
    return 0;
}

/* The latest record on `stream` before record `before`: the work an event
 * recorded there then stands for. -1 if none. */
static int last_on_stream(fm_Timer *t, uintptr_t stream, int before)
{
    for (int i = before - 1; i >= 0; i--) {
        fm_record *r = &t->records[i];
        if (r->stream == stream && (r->start != NULL || r->gpu_ms >= 0 || r->session >= 0))
            return i;
    }
    return -1;
}

void fm_call_behind(fm_call *call, uintptr_t stream, int mark)
{
    fm_Timer *t = call->timer;
    if (t == NULL || stream == 0)
        return;
    int before = mark >= 0 && mark <= call->record ? mark : call->record;
    t->records[call->record].behind_stream = stream;
    t->records[call->record].behind = last_on_stream(t, stream, before);
}

int fm_timer_mark(fm_state *st)
{
    if (st->profiles_active == 0)
        return -1;
    int error;
    fm_Timer *t = active_timer(st, NULL, &error);
    if (error) {
        PyErr_Clear();
        return -1;
    }
    if (t == NULL)
        return -1;
    int mark = (int)t->n;
    Py_DECREF(t);
    return mark;
}

/* Earlier calls on the same stream whose GPU work is not done yet: the wait
 * is for them. Scans back until a finished call on the stream is found. */
static void note_causes(fm_Timer *t, fm_record *r, int self_index)
{
    for (int i = self_index - 1; i >= 0; i--) {
        fm_record *earlier = &t->records[i];
        if (earlier->stream != r->stream || !earlier->ended || earlier->gpu_ms >= 0)
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
    if (r->wait_start_ns == 0)
        r->wait_start_ns = call->wait_start;
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
    fm_record *r = &call->timer->records[call->record];
    const int64_t end = now_ns(), done = fm_wait_done_ns();
    r->waited_ns += end - call->wait_start;
    if (done >= call->wait_start && done <= end)
        r->gil_ns += end - done;
    call->wait_start = 0;
}

PyObject *fm_call_end(fm_state *st, fm_call *call, PyObject *result)
{
    fm_Timer *t = call->timer;
    if (t != NULL && result != NULL && t->sync && call->stream != NULL && !call->drained) {
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
        r->done = 1;
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
    for (int d = 0; d < FM_MAX_DEVICES; d++)
        self->current[d] = -1;
    return (PyObject *)self;
}

/* Reads a record's GPU times and gives its events back. cudaErrorNotReady
 * when its work is not done: nothing is read then. Asking for the elapsed
 * time is the completion test, so reading a done record costs no query. */
static cudaError_t read_times(fm_Timer *t, fm_record *r)
{
    float ms = 0.0f, start_ms = 0.0f, queued_ms = -1.0f;
    cudaEvent_t anchor = t->anchors[r->anchor].event;
    cudaError_t err = cudaEventElapsedTime(&ms, r->start, r->end);
    if (err == cudaSuccess)
        err = cudaEventElapsedTime(&start_ms, anchor, r->start);
    if (err == cudaSuccess && r->queued != NULL)
        err = cudaEventElapsedTime(&queued_ms, anchor, r->queued);
    if (err != cudaSuccess)
        return err;
    r->gpu_ms = ms;
    r->gpu_start_ms = start_ms;
    r->queued_ms = queued_ms;
    r->anchor_host_ns = t->anchors[r->anchor].host_ns;
    release_anchor(t, r->anchor);
    r->anchor = -1;
    give_back_event(t, r->device, r->start);
    give_back_event(t, r->device, r->end);
    if (r->queued != NULL)
        give_back_event(t, r->device, r->queued);
    r->start = r->end = r->queued = NULL;
    return cudaSuccess;
}

static int read_record(fm_Timer *t, fm_record *r)
{
    cudaError_t err = read_times(t, r);
    if (err != cudaSuccess)
        return fm_cuda_fail(t->st, err, "reading the GPU time of %s", r->name);
    return 0;
}

/* After a call's end event: reads the oldest records whose work is done, so
 * their events are reused; a long profile then creates none per call. Looks
 * at a few at a time, never waits, never raises. */
static void reclaim(fm_Timer *t, int device)
{
    int looked = 0;
    while (t->reclaimed < t->n && looked < 8) {
        fm_record *r = &t->records[t->reclaimed];
        if (!r->done)
            return;         /* a call still open: its events may not be recorded yet */
        if (r->gpu_ms >= 0 || r->start == NULL || !r->ended) {
            t->reclaimed++;
            continue;
        }
        looked++;
        if (r->device != device || read_times(t, r) != cudaSuccess) {
            (void)cudaGetLastError();   /* not done yet, or unreadable: resolve() says */
            return;
        }
        t->reclaimed++;
    }
}

/* Reads the GPU time of every record whose events are not read yet; waits
 * (GIL released) only for work still pending. */
static int resolve(fm_Timer *t)
{
    for (size_t i = 0; i < t->n; i++) {
        fm_record *r = &t->records[i];
        if (r->gpu_ms >= 0 || r->start == NULL || !r->ended)
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
        if (err != cudaSuccess)
            return fm_cuda_fail(t->st, err, "reading the GPU time of %s", r->name);
        if (read_record(t, r) < 0)
            return -1;
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
        PyObject *gpu_start = Py_NewRef(Py_None), *queued = Py_NewRef(Py_None);
        if (r->gpu_ms >= 0 && r->device >= 0) {
            Py_DECREF(gpu_start);
            gpu_start = PyLong_FromLongLong(r->anchor_host_ns
                                            + (long long)(r->gpu_start_ms * 1e6));
            if (r->queued_ms >= 0) {
                Py_DECREF(queued);
                queued = PyLong_FromLongLong(r->anchor_host_ns
                                             + (long long)(r->queued_ms * 1e6));
            }
        }
        PyObject *item = Py_BuildValue(
            "(szKiiiiiLLLNNNiNiKiLLLLLi)", r->name, r->activity, (unsigned long long)r->stream,
            r->device, r->height, r->width, r->channels, r->parent, (long long)r->host_start_ns,
            (long long)r->host_ns, (long long)r->waited_ns, gpu, gpu_start, causes, r->n_causes,
            queued, r->behind, (unsigned long long)r->behind_stream, r->session,
            (long long)r->wait_start_ns, (long long)r->bytes_read, (long long)r->bytes_written,
            (long long)r->gil_ns, (long long)(r->submitted_ns > 0 ? r->submitted_ns : 0),
            r->gated);
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
        if (t->records[i].queued != NULL)
            (void)cudaEventDestroy(t->records[i].queued);
    }
    t->n = 0;
    t->reclaimed = 0;
    t->open = -1;
    for (int a = 0; a < t->n_anchors; a++)
        if (t->anchors[a].event != NULL)
            (void)cudaEventDestroy(t->anchors[a].event);
    t->n_anchors = 0;
    for (int d = 0; d < FM_MAX_DEVICES; d++)
        t->current[d] = -1;
}

static PyObject *Timer_reset(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    drop_records((fm_Timer *)op);
    Py_RETURN_NONE;
}

/* Records hold plain C names; a dict of them keeps each name's text alive. */
static const char *keep_name(fm_Timer *t, PyObject *name)
{
    if (!PyUnicode_Check(name)) {
        PyErr_SetString(PyExc_TypeError, "names must be str");
        return NULL;
    }
    if (t->names == NULL && (t->names = PyDict_New()) == NULL)
        return NULL;
    PyObject *kept = PyDict_SetDefault(t->names, name, name);  /* borrowed */
    return kept != NULL ? PyUnicode_AsUTF8(kept) : NULL;
}

/* A record made from Python, outside the call scope: no NVTX, no nesting. */
static int python_record(fm_Timer *t, PyObject *name, PyObject *activity, fm_Stream *stream,
                         int h, int w, int c)
{
    const char *text = keep_name(t, name);
    if (text == NULL)
        return -1;
    const char *act = NULL;
    if (activity != NULL && activity != Py_None && (act = keep_name(t, activity)) == NULL)
        return -1;
    fm_call call;
    if (fm_call_begin(t->st, &call, text, act, (PyObject *)t, stream, h, w, c) < 0)
        return -1;
    if (call.nvtx)
        fm_nvtx_pop(t->st);  /* the caller has its own range */
    fm_record *r = &t->records[call.record];
    t->open = r->parent;
    r->parent = -1;
    Py_DECREF(call.timer);
    return call.record;
}

static PyObject *host_record(fm_Timer *t, PyObject *name, long long start_ns, long long host_ns,
                             int h, int w, int c, PyObject *activity, int session)
{
    int parent = t->open;
    int index = python_record(t, name, activity, NULL, h, w, c);
    if (index < 0)
        return NULL;
    fm_record *r = &t->records[index];
    /* a decoder session's thread is nobody's nested call */
    r->parent = session >= 0 ? -1 : parent;
    r->host_start_ns = start_ns;
    r->host_ns = host_ns;
    r->session = session;
    r->done = 1;
    Py_RETURN_NONE;
}

static PyObject *Timer_host_call(PyObject *op, PyObject *args)
{
    PyObject *name;
    long long start_ns, host_ns;
    int h, w, c;
    if (!PyArg_ParseTuple(args, "ULL(iii):_host_call", &name, &start_ns, &host_ns, &h, &w, &c))
        return NULL;
    return host_record((fm_Timer *)op, name, start_ns, host_ns, h, w, c, Py_None, -1);
}

static PyObject *Timer_decoder_call(PyObject *op, PyObject *args)
{
    PyObject *name, *activity;
    long long start_ns, host_ns;
    int h, w, c, session;
    if (!PyArg_ParseTuple(args, "ULL(iii)Oi:_decoder_call", &name, &start_ns, &host_ns, &h, &w,
                          &c, &activity, &session))
        return NULL;
    return host_record((fm_Timer *)op, name, start_ns, host_ns, h, w, c, activity, session);
}

/* The stream and host start a Python-made GPU record names: `stream_arg`
 * must be a fastmog.Stream, `host_start` None or an int of host ns. */
static fm_Stream *span_stream(fm_Timer *t, PyObject *stream_arg, PyObject *host_start,
                              long long *start_ns)
{
    fm_Stream *stream = fm_require_stream(t->st, stream_arg, -1);
    if (stream == NULL)
        return NULL;
    *start_ns = 0;
    if (host_start != Py_None && (*start_ns = PyLong_AsLongLong(host_start)) == -1
        && PyErr_Occurred())
        return NULL;
    return stream;
}

/* _gpu_begin(name, activity, stream, shape, *, session=-1, host_start_ns=None):
 * a record whose GPU window is work the caller queues on `stream` next (a
 * decoder's output copy); timer-owned events, so the caller's events may be
 * re-recorded at will. Returns the record's index for _gpu_end. */
static PyObject *Timer_gpu_begin(PyObject *op, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"", "", "", "", "session", "host_start_ns", NULL};
    fm_Timer *t = (fm_Timer *)op;
    PyObject *name, *activity, *stream_arg, *host_start = Py_None;
    int h, w, c, session = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "UOO(iii)|$iO:_gpu_begin", kwlist, &name,
                                     &activity, &stream_arg, &h, &w, &c, &session, &host_start))
        return NULL;
    long long start_ns;
    fm_Stream *stream = span_stream(t, stream_arg, host_start, &start_ns);
    if (stream == NULL)
        return NULL;
    fm_device_guard guard;
    if (fm_device_enter(t->st, stream->device, &guard) < 0)
        return NULL;
    int index = python_record(t, name, activity, stream, h, w, c);
    if (index >= 0) {
        fm_record *r = &t->records[index];
        r->session = session;
        if (start_ns > 0)
            r->host_start_ns = start_ns;
        /* the span's work may be many operations: when the first was
         * submitted is known only if the caller says (_gpu_submitted) */
        r->submitted_ns = -1;
        fm_call call = {.timer = t, .record = index, .stream = stream};
        if (fm_call_gpu_begin(t->st, &call) < 0)
            index = -1;
    }
    fm_device_exit(&guard);
    return index >= 0 ? PyLong_FromLong(index) : NULL;
}

static PyObject *Timer_gpu_end(PyObject *op, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"", "stream", "bytes_read", "bytes_written", NULL};
    fm_Timer *t = (fm_Timer *)op;
    PyObject *stream_arg = NULL;
    int index;
    long long read = 0, written = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "i|$OLL:_gpu_end", kwlist, &index,
                                     &stream_arg, &read, &written))
        return NULL;
    fm_Stream *stream = fm_require_stream(t->st, stream_arg, -1);
    if (stream == NULL)
        return NULL;
    if (index < 0 || (size_t)index >= t->n || t->records[index].stream != (uintptr_t)stream->handle) {
        PyErr_SetString(PyExc_ValueError, "no record begun on that stream with that index");
        return NULL;
    }
    fm_device_guard guard;
    if (fm_device_enter(t->st, stream->device, &guard) < 0)
        return NULL;
    fm_call call = {.timer = t, .record = index, .stream = stream};
    int rc = fm_call_gpu_end(t->st, &call);
    fm_device_exit(&guard);
    if (rc < 0)
        return NULL;
    fm_record *r = &t->records[index];
    r->bytes_read += read;
    r->bytes_written += written;
    r->host_ns = now_ns() - r->host_start_ns;
    r->done = 1;
    Py_RETURN_NONE;
}

/* _gpu_copies(name, activity, stream, shape, pairs, /, *, session=-1,
 * host_start_ns=None): queues the device-to-device copies `pairs` ((src,
 * dst) GpuMats) on `stream` as one record, its events right beside the
 * copies in this one call: no Python step between them in which another
 * thread could take the GIL while the idle stream counts the time (a
 * decoder's output copy). All pairs are checked before anything is
 * queued. Returns the record's index. */
#define FM_SPAN_COPIES_MAX 4
static PyObject *Timer_gpu_copies(PyObject *op, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"", "", "", "", "", "session", "host_start_ns", NULL};
    fm_Timer *t = (fm_Timer *)op;
    fm_state *st = t->st;
    PyObject *name, *activity, *stream_arg, *pairs_arg, *host_start = Py_None, *pairs = NULL;
    int h, w, c, session = -1, index = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "UOO(iii)O|$iO:_gpu_copies", kwlist, &name,
                                     &activity, &stream_arg, &h, &w, &c, &pairs_arg, &session,
                                     &host_start))
        return NULL;
    long long start_ns;
    fm_Stream *stream = span_stream(t, stream_arg, host_start, &start_ns);
    if (stream == NULL)
        return NULL;
    pairs = PySequence_Fast(pairs_arg, "pairs must be a sequence of (src, dst) GpuMats");
    if (pairs == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(pairs);
    fm_GpuMat *src[FM_SPAN_COPIES_MAX], *dst[FM_SPAN_COPIES_MAX];
    if (n < 1 || n > FM_SPAN_COPIES_MAX) {
        PyErr_Format(PyExc_ValueError, "pairs holds %zd copies; 1 to %d are timed as one span",
                     n, FM_SPAN_COPIES_MAX);
        goto error;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PySequence_Fast_GET_ITEM(pairs, i);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_SetString(PyExc_TypeError, "each of pairs must be a (src, dst) tuple");
            goto error;
        }
        src[i] = fm_gpumat_copy_pair(st, PyTuple_GET_ITEM(pair, 0), PyTuple_GET_ITEM(pair, 1),
                                     "dst", &dst[i]);
        if (src[i] == NULL || fm_check_same_device(src[i], stream->device, "src") < 0)
            goto error;
    }
    if (fm_stream_hold(stream) < 0)
        goto error;
    fm_device_guard guard;
    if (fm_device_enter(st, stream->device, &guard) == 0) {
        int rc = 0;
        for (Py_ssize_t i = 0; i < n && rc == 0; i++)
            rc = fm_gpumat_copy_use(st, src[i], dst[i], stream);
        if (rc == 0 && (index = python_record(t, name, activity, stream, h, w, c)) >= 0) {
            fm_record *r = &t->records[index];
            r->session = session;
            if (start_ns > 0)
                r->host_start_ns = start_ns;
            fm_call call = {.timer = t, .record = index, .stream = stream};
            /* The copies' window opens behind a gate, opened once they and
             * the end event are queued: see gate.c. The anchor (on a stream
             * of its own, which may share the gated stream's hardware queue)
             * and the events are taken before it closes, and earlier
             * records are read back after it opens: nothing else waits
             * behind it or keeps it shut. */
            fm_gate gate = {0};
            rc = gpu_prepare(st, &call);
            if (rc == 0)
                rc = fm_gate_close(st, stream->handle, &gate);
            if (rc == 0)
                rc = fm_call_gpu_begin(st, &call);
            fm_call_gpu_submitted(&call);       /* copies: see fastmog.h */
            for (Py_ssize_t i = 0; i < n && rc == 0; i++)
                rc = fm_gpumat_copy_queue(st, src[i], dst[i], stream, &call);
            if (rc == 0)
                rc = gpu_record_end(st, &call);
            const int gated = gate.closed && rc == 0;
            fm_gate_open(st, &gate);
            reclaim_if_low(t, stream->device);
            r = &t->records[index];
            r->gated = gated;
            r->host_ns = now_ns() - r->host_start_ns;
            r->done = 1;
            if (rc < 0)
                index = -1;
        }
        fm_device_exit(&guard);
    }
    fm_stream_unhold(stream);
error:
    Py_DECREF(pairs);
    return index >= 0 ? PyLong_FromLong(index) : NULL;
}

/* _gpu_submitted(index): the first operation of span `index` has been
 * submitted; the GPU's wait for the host before then is no part of it. */
static PyObject *Timer_gpu_submitted(PyObject *op, PyObject *arg)
{
    fm_Timer *t = (fm_Timer *)op;
    long index = PyLong_AsLong(arg);
    if (index == -1 && PyErr_Occurred())
        return NULL;
    if (index < 0 || (size_t)index >= t->n || t->records[index].done) {
        PyErr_SetString(PyExc_ValueError, "no open span with that index");
        return NULL;
    }
    if (t->records[index].submitted_ns <= 0)
        t->records[index].submitted_ns = now_ns();
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
    PyMem_Free(t->anchors);
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
    {"_decoder_call", Timer_decoder_call, METH_VARARGS,
     "_decoder_call($self, name, start_ns, host_ns, shape, activity, session, /)\n--\n\n"
     "_host_call for a decoder: `activity` names its engine (\"NVDEC\"), `session` its\n"
     "session (-1: the calling thread's); a session's record is never nested."},
    {"_gpu_begin", (PyCFunction)(void (*)(void))Timer_gpu_begin, METH_VARARGS | METH_KEYWORDS,
     "_gpu_begin($self, name, activity, stream, shape, /, *, session=-1, host_start_ns=None)"
     "\n--\n\nStarts a GPU-timed record of work about to be queued on `stream` (a decoder's "
     "output copy); returns its index for _gpu_end."},
    {"_gpu_submitted", Timer_gpu_submitted, METH_O,
     "_gpu_submitted($self, index, /)\n--\n\nSays that span `index` has submitted its first "
     "operation."},
    {"_gpu_copies", (PyCFunction)(void (*)(void))Timer_gpu_copies, METH_VARARGS | METH_KEYWORDS,
     "_gpu_copies($self, name, activity, stream, shape, pairs, /, *, session=-1, "
     "host_start_ns=None)\n--\n\nQueues the (src, dst) GpuMat copies `pairs` on `stream` "
     "as one GPU-timed record, its events beside the copies; returns its index."},
    {"_gpu_end", (PyCFunction)(void (*)(void))Timer_gpu_end, METH_VARARGS | METH_KEYWORDS,
     "_gpu_end($self, index, /, *, stream, bytes_read=0, bytes_written=0)\n--\n\n"
     "Ends the GPU window of record `index` after the work queued on `stream`."},
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
