/* The hidden base type _MOG2Base that both subtractors derive from: the
 * lifecycle (init, lock, close, reset), the frame bookkeeping, the verbs'
 * arguments and the image rules; its parameters come from mog2_params.c. */
#include "mog2_base.h"
#include "docstrings.h"

#include <string.h>

/* ---- the base type ---------------------------------------------------------- */

int fm_mog2_base_init(fm_MOG2Base *self, PyObject *args, PyObject *kwargs,
                      const char *type_name, PyObject **device, fm_mog2_release_fn release)
{
    if (fm_mog2_settings_parse(&self->settings, args, kwargs, type_name, device) < 0)
        return -1;
    self->release = release;
    self->lock = PyThread_allocate_lock();
    if (self->lock == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static int base_release(PyObject *op)
{
    fm_mog2_base_fini((fm_MOG2Base *)op);
    return 0;
}

void fm_mog2_dealloc(PyObject *op)
{
    fm_gc_dealloc(op, base_release);
}

void fm_mog2_base_fini(fm_MOG2Base *self)
{
    if (self->release != NULL)
        self->release(self);
    if (self->lock != NULL)
        PyThread_free_lock(self->lock);
    self->lock = NULL;
}

static void lock_wait(PyThread_type_lock lock)
{
    if (PyThread_acquire_lock(lock, NOWAIT_LOCK))
        return;
    Py_BEGIN_ALLOW_THREADS
    PyThread_acquire_lock(lock, WAIT_LOCK);
    Py_END_ALLOW_THREADS
}

int fm_mog2_lock_open(fm_MOG2Base *self)
{
    lock_wait(self->lock);
    /* Checked under the lock: a close() that won the race stays closed. */
    if (self->closed) {
        PyThread_release_lock(self->lock);
        PyErr_SetString(PyExc_ValueError, "the subtractor is closed");
        return -1;
    }
    return 0;
}

void fm_mog2_unlock(fm_MOG2Base *self)
{
    PyThread_release_lock(self->lock);
}

int fm_mog2_learning_rate_arg(PyObject *arg, double *rate)
{
    *rate = -1.0;
    if (arg == NULL)
        return 0;
    if (!PyFloat_Check(arg) && !PyLong_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "learning_rate must be a number, not %.200s",
                     Py_TYPE(arg)->tp_name);
        return -1;
    }
    double v = PyFloat_AsDouble(arg);
    if (v == -1.0 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError))
            return -1;
        PyErr_Clear();
        /* An int too large for a float: a huge negative one is still "automatic". */
        v = PyObject_RichCompareBool(arg, Py_False, Py_LT) == 1 ? -HUGE_VAL : HUGE_VAL;
    }
    /* OpenCV takes any finite rate (1 and more restart the model every frame)
     * and any negative one (automatic); NaN and +inf mean nothing. */
    if (isnan(v) || v == HUGE_VAL) {
        PyErr_Format(PyExc_ValueError,
                     "learning_rate must be a finite number (negative: automatic), got %R", arg);
        return -1;
    }
    *rate = v;
    return 0;
}

int fm_mog2_call_args_parse(fm_state *st, PyObject *args, PyObject *kwargs, int flags,
                            int device, fm_mog2_call_args *a)
{
    /* Indexed by flags: host apply, host apply_batch, GPU apply, GPU apply_batch. */
    static char *kwlists[4][7] = {
        {"", "learning_rate", "fgmask", "known_foreground", "timer", NULL},
        {"", "learning_rate", "fgmasks", "known_foreground", "timer", NULL},
        {"", "learning_rate", "stream", "fgmask", "known_foreground", "timer", NULL},
        {"", "learning_rate", "stream", "fgmasks", "known_foreground", "timer", NULL},
    };
    static const char *formats[4] = {"O|O$OOO:apply", "O|O$OOO:apply_batch",
                                     "O|O$OOOO:apply", "O|O$OOOO:apply_batch"};
    PyObject *rate_arg = NULL, *stream_arg = NULL;
    a->stream = NULL;
    a->fgmasks = a->known = Py_None;
    a->timer = NULL;
    int ok = flags & FM_MOG2_CALL_GPU
        ? PyArg_ParseTupleAndKeywords(args, kwargs, formats[flags], kwlists[flags], &a->frames,
                                      &rate_arg, &stream_arg, &a->fgmasks, &a->known, &a->timer)
        : PyArg_ParseTupleAndKeywords(args, kwargs, formats[flags], kwlists[flags], &a->frames,
                                      &rate_arg, &a->fgmasks, &a->known, &a->timer);
    if (!ok)
        return -1;
    if (flags & FM_MOG2_CALL_GPU) {
        if ((a->stream = fm_require_stream(st, stream_arg, device)) == NULL)
            return -1;
        if (!(flags & FM_MOG2_CALL_BATCH) && a->fgmasks != Py_None
            && fm_gpumat_check_open(st, a->fgmasks, "fgmask") == NULL)
            return -1;
    }
    return fm_mog2_learning_rate_arg(rate_arg, &a->learning_rate);
}

/* The step of one frame after a model built for `had` has seen
 * `frames_seen` frames. */
static void plan_after(const fm_mog2_settings *settings, const fm_mog2_geometry *had,
                       long frames_seen, const fm_image_shape *frame, double learning_rate,
                       fm_mog2_step *step)
{
    fm_mog2_geometry g = {frame->width, frame->height, frame->channels,
                          frame->type_num == NPY_FLOAT32, settings->n_mixtures};
    step->geometry = g;
    step->rebuild = had->width == 0 || had->width != g.width || had->height != g.height
                    || had->channels != g.channels || had->is_float != g.is_float
                    || had->n_mixtures != g.n_mixtures;
    if (step->rebuild)
        frames_seen = 0;
    step->restart = step->rebuild || fm_mog2_needs_reset(frames_seen, learning_rate);
    if (step->restart)
        frames_seen = 0;
    step->frames_seen = frames_seen + 1;
    step->params = fm_mog2_settings_params(settings);
    double rate = fm_mog2_learning_rate(learning_rate, step->frames_seen, settings->history);
    step->rates = fm_mog2_make_rates(&step->params, rate);
}

int fm_mog2_plan(const fm_MOG2Base *self, const fm_image_shape *frame, double learning_rate,
                 fm_mog2_step *step)
{
    plan_after(&self->settings, &self->geometry, self->frames_seen, frame, learning_rate, step);
    return 0;
}

void fm_mog2_plan_frames(const fm_MOG2Base *self, const fm_image_shape *frame,
                         double learning_rate, int count, fm_mog2_step *steps)
{
    for (int k = 0; k < count; ++k) {
        if (k == 0)
            plan_after(&self->settings, &self->geometry, self->frames_seen, frame,
                       learning_rate, &steps[0]);
        else
            plan_after(&self->settings, &steps[k - 1].geometry, steps[k - 1].frames_seen, frame,
                       learning_rate, &steps[k]);
    }
}

void fm_mog2_commit(fm_MOG2Base *self, const fm_mog2_step *step)
{
    self->geometry = step->geometry;
    self->frames_seen = step->frames_seen;
}

/* ---- arguments of the batched and multi-camera calls ---------------------- */

PyObject *fm_mog2_items(PyObject *arg, const char *name, Py_ssize_t count)
{
    char message[96];
    snprintf(message, sizeof message, "%s must be a sequence (a list, a tuple or an array)",
             name);
    PyObject *items = PySequence_Fast(arg, message);
    if (items != NULL && PyList_Check(items))
        Py_SETREF(items, PyList_AsTuple(items));
    if (items != NULL && count >= 0 && PySequence_Fast_GET_SIZE(items) != count) {
        PyErr_Format(PyExc_ValueError, "%s has %zd entries for %zd frames", name,
                     PySequence_Fast_GET_SIZE(items), count);
        Py_CLEAR(items);
    }
    if (items != NULL && PySequence_Fast_GET_SIZE(items) > INT_MAX / 2) {
        PyErr_Format(PyExc_ValueError, "%s: too many entries for one call", name);
        Py_CLEAR(items);
    }
    return items;
}

/* The bytes a numpy array spans, [*lo, *hi); 0 when it spans none. */
static int array_extent(PyArrayObject *a, const char **lo, const char **hi)
{
    const char *first = PyArray_BYTES(a), *last = first + PyArray_ITEMSIZE(a);
    for (int d = 0; d < PyArray_NDIM(a); d++) {
        npy_intp n = PyArray_DIM(a, d), stride = PyArray_STRIDE(a, d);
        if (n == 0)
            return 0;
        if (stride > 0)
            last += (n - 1) * stride;
        else
            first += (n - 1) * stride;
    }
    *lo = first;
    *hi = last;
    return 1;
}

/* Each mask is written once per frame: two entries that are one object, or
 * numpy arrays over shared bytes, would see one frame's mask overwrite
 * another's. ValueError naming the two indices. */
static int masks_distinct(PyObject *masks)
{
    Py_ssize_t n = PySequence_Fast_GET_SIZE(masks);
    PyObject **items = PySequence_Fast_ITEMS(masks);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (items[i] == Py_None)
            continue;
        for (Py_ssize_t j = i + 1; j < n; j++) {
            int shared = items[i] == items[j];
            const char *a0, *a1, *b0, *b1;
            if (!shared && PyArray_Check(items[i]) && PyArray_Check(items[j])
                && array_extent((PyArrayObject *)items[i], &a0, &a1)
                && array_extent((PyArrayObject *)items[j], &b0, &b1))
                shared = a0 < b1 && b0 < a1;
            if (shared) {
                PyErr_Format(PyExc_ValueError,
                             "fgmasks[%zd] and fgmasks[%zd] are the same output buffer: "
                             "each frame needs a mask of its own", i, j);
                return -1;
            }
        }
    }
    return 0;
}

int fm_mog2_sequences_get(fm_mog2_sequences *seq, PyObject *frames, PyObject *known,
                          PyObject *fgmasks, Py_ssize_t count)
{
    memset(seq, 0, sizeof *seq);
    if ((seq->frames = fm_mog2_items(frames, "frames", count)) == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq->frames);
    if ((known != Py_None && (seq->known = fm_mog2_items(known, "known_foreground", n)) == NULL)
        || (fgmasks != Py_None && ((seq->fgmasks = fm_mog2_items(fgmasks, "fgmasks", n)) == NULL
                                   || masks_distinct(seq->fgmasks) < 0))) {
        fm_mog2_sequences_clear(seq);
        return -1;
    }
    seq->count = (int)n;
    return 0;
}

int fm_mog2_call_frames(const fm_mog2_call_args *a, int flags, fm_mog2_sequences *seq)
{
    if (flags & FM_MOG2_CALL_BATCH)
        return fm_mog2_sequences_get(seq, a->frames, a->known, a->fgmasks, -1);
    seq->frames = a->frames;
    seq->known = a->known != Py_None ? a->known : NULL;
    seq->fgmasks = a->fgmasks != Py_None ? a->fgmasks : NULL;
    seq->count = seq->one = 1;
    return 0;
}

void fm_mog2_sequences_clear(fm_mog2_sequences *seq)
{
    if (seq->one) {                 /* borrowed */
        seq->frames = seq->known = seq->fgmasks = NULL;
        return;
    }
    Py_CLEAR(seq->frames);
    Py_CLEAR(seq->known);
    Py_CLEAR(seq->fgmasks);
}

static int by_address(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)*(fm_MOG2Base *const *)a, y = (uintptr_t)*(fm_MOG2Base *const *)b;
    return x < y ? -1 : x > y;
}

int fm_mog2_camera_args(PyObject *subs, PyTypeObject *type, PyObject *rate_arg,
                        fm_MOG2Base **cameras, double *rates, fm_MOG2Base **locking)
{
    int count = (int)PySequence_Fast_GET_SIZE(subs);
    for (int k = 0; k < count; ++k) {
        PyObject *obj = PySequence_Fast_GET_ITEM(subs, k);
        if (!PyObject_TypeCheck(obj, type)) {
            PyErr_Format(PyExc_TypeError, "subtractors[%d] must be a %s, not %.100s", k,
                         type->tp_name, Py_TYPE(obj)->tp_name);
            return -1;
        }
        cameras[k] = locking[k] = (fm_MOG2Base *)obj;
    }
    qsort(locking, (size_t)count, sizeof *locking, by_address);
    for (int k = 1; k < count; ++k) {
        if (locking[k] == locking[k - 1]) {
            PyErr_SetString(PyExc_ValueError,
                            "subtractors: the same subtractor appears twice (one model "
                            "cannot take two frames at once; use apply_batch)");
            return -1;
        }
    }
    if (rate_arg == NULL || PyNumber_Check(rate_arg)) {
        double rate;
        if (fm_mog2_learning_rate_arg(rate_arg, &rate) < 0)
            return -1;
        for (int k = 0; k < count; ++k)
            rates[k] = rate;
        return 0;
    }
    PyObject *items = fm_mog2_items(rate_arg, "learning_rate", count);
    if (items == NULL)
        return -1;
    int rc = 0;
    for (int k = 0; k < count && rc == 0; ++k)
        rc = fm_mog2_learning_rate_arg(PySequence_Fast_GET_ITEM(items, k), &rates[k]);
    Py_DECREF(items);
    return rc;
}

int fm_mog2_lock_all(fm_MOG2Base **locking, int count)
{
    for (int k = 0; k < count; ++k) {
        if (fm_mog2_lock_open(locking[k]) < 0) {
            fm_mog2_unlock_all(locking, k);
            return -1;
        }
    }
    return 0;
}

void fm_mog2_unlock_all(fm_MOG2Base **locking, int count)
{
    while (count > 0)
        fm_mog2_unlock(locking[--count]);
}

/* The launch grid has 65535 rows of 8-pixel-tall blocks at most. */
#define FM_MOG2_MAX_HEIGHT (65535 * 8)

fm_image_rule fm_mog2_frame_rule(void)
{
    fm_image_rule rule = {FM_DTYPE_BIT(NPY_UINT8) | FM_DTYPE_BIT(NPY_FLOAT32), FM_IMAGE_CHANNELS,
                          0, 0, NULL, 0, FM_MOG2_MAX_HEIGHT};
    return rule;
}

fm_image_rule fm_mog2_batch_frame_rule(const fm_image_shape *first)
{
    fm_image_rule rule = {FM_DTYPE_BIT(first->type_num), FM_CHANNELS_BIT(first->channels),
                          first->height, first->width, "frames[0]", 0, 0};
    return rule;
}

fm_image_rule fm_mog2_mask_rule(const fm_image_shape *frame, int writable)
{
    fm_image_rule rule = {FM_DTYPE_BIT(NPY_UINT8), FM_CHANNELS_BIT(1), frame->height,
                          frame->width, "the frame", writable, 0};
    return rule;
}

fm_image_shape fm_mog2_background_shape(const fm_mog2_geometry *g)
{
    fm_image_shape s = {g->height, g->width, g->channels, g->channels == 1 ? 2 : 3,
                        g->is_float ? NPY_FLOAT32 : NPY_UINT8, 0};
    return s;
}

fm_image_rule fm_mog2_background_rule(const fm_mog2_geometry *g)
{
    fm_image_rule rule = {FM_DTYPE_BIT(g->is_float ? NPY_FLOAT32 : NPY_UINT8),
                          FM_CHANNELS_BIT(g->channels), g->height, g->width, "the model", 1, 0};
    return rule;
}

static PyObject *Base_get_frame_count(PyObject *op, void *Py_UNUSED(closure))
{
    return PyLong_FromLong(((fm_MOG2Base *)op)->frames_seen);
}

static PyObject *Base_get_closed(PyObject *op, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(((fm_MOG2Base *)op)->closed);
}

static PyGetSetDef Base_getset[] = {
    FM_MOG2_FIELDS(FM_MOG2_PROPERTY)
    {"frame_count", Base_get_frame_count, NULL, "Frames in the current model.", NULL},
    {"closed", Base_get_closed, NULL, "True once close() has run.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyObject *Base_reset(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    fm_MOG2Base *self = (fm_MOG2Base *)op;
    if (fm_mog2_lock_open(self) < 0)
        return NULL;
    self->frames_seen = 0;
    fm_mog2_unlock(self);
    Py_RETURN_NONE;
}

static PyObject *Base_close(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    fm_MOG2Base *self = (fm_MOG2Base *)op;
    lock_wait(self->lock);
    self->closed = 1;
    if (self->release != NULL)
        self->release(self);
    self->geometry.width = 0;
    self->frames_seen = 0;
    PyThread_release_lock(self->lock);
    Py_RETURN_NONE;
}

static PyObject *Base_enter(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    if (((fm_MOG2Base *)op)->closed) {
        PyErr_SetString(PyExc_ValueError, "the subtractor is closed");
        return NULL;
    }
    return Py_NewRef(op);
}

static PyObject *Base_exit(PyObject *op, PyObject *Py_UNUSED(args))
{
    return Base_close(op, NULL);
}

static PyMethodDef Base_methods[] = {
    FM_MOG2_FIELDS(FM_MOG2_ALIASES)
    {"reset", Base_reset, METH_NOARGS, FM_DOC_BASE_RESET},
    {"clear", Base_reset, METH_NOARGS, "OpenCV-style alias of reset."},
    {"close", Base_close, METH_NOARGS, FM_DOC_BASE_CLOSE},
    {"__enter__", Base_enter, METH_NOARGS, NULL},
    {"__exit__", Base_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static int Base_traverse(PyObject *op, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(op));
    return 0;
}

static PyType_Slot Base_slots[] = {
    {Py_tp_methods, Base_methods},
    {Py_tp_getset, Base_getset},
    {Py_tp_traverse, Base_traverse},
    {Py_tp_doc, (void *)"What both MOG2 subtractors share (internal)."},
    {0, NULL},
};

PyType_Spec fm_mog2_base_spec = {
    .name = "fastmog._MOG2Base",
    .basicsize = sizeof(fm_MOG2Base),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC
             | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = Base_slots,
};
