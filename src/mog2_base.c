/* The hidden base type _MOG2Base that both subtractors derive from: the
 * lifecycle (init, lock, close, reset) and the frame bookkeeping; its
 * parameters come from mog2_params.c, the verbs' arguments from mog2_args.c. */
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
