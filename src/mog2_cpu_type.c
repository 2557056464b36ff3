/* fastmog.cpu.BackgroundSubtractorMOG2: the same algorithm on the host, from
 * the same per-pixel code (cuda/mog2_pixel.h, looped over by mog2_cpu.c). It
 * is the tests' oracle and lets the main job run where there is no GPU. */
#include "mog2_base.h"
#include "mog2_cpu.h"

typedef struct fm_MOG2Cpu {
    fm_MOG2Base base;
    void *model;                    /* the layout of fm_mog2_model_at; owned, PyMem_Raw */
} fm_MOG2Cpu;

static void release_model(fm_MOG2Base *base)
{
    fm_MOG2Cpu *self = (fm_MOG2Cpu *)base;
    PyMem_RawFree(self->model);
    self->model = NULL;
}

static PyObject *MOG2Cpu_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    fm_MOG2Cpu *self = (fm_MOG2Cpu *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    if (fm_mog2_base_init(&self->base, args, kwargs, "BackgroundSubtractorMOG2", NULL,
                          release_model) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static int rebuild_model(fm_MOG2Cpu *self, const fm_mog2_geometry *g)
{
    void *model = PyMem_RawCalloc(1, fm_mog2_model_bytes(g));
    if (model == NULL) {
        PyErr_Format(PyExc_MemoryError, "cannot allocate a %dx%dx%d MOG2 model", g->height,
                     g->width, g->channels);
        return -1;
    }
    release_model(&self->base);
    self->model = model;
    return 0;
}

PyDoc_STRVAR(MOG2Cpu_apply_doc,
"apply($self, frame, /, learning_rate=-1.0, *, fgmask=None, known_foreground=None,\n"
"      timer=None)\n--\n\n"
"Updates the model with a numpy frame and returns the uint8 mask (a new\n"
"array, or `fgmask`). Same semantics as fastmog.BackgroundSubtractorMOG2.apply,\n"
"without a stream: the work is done when the call returns.");

static PyObject *MOG2Cpu_apply(PyObject *op, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"", "learning_rate", "fgmask", "known_foreground", "timer", NULL};
    fm_MOG2Cpu *self = (fm_MOG2Cpu *)op;
    fm_state *st = fm_state_of(op);
    PyObject *frame_arg, *fgmask_arg = Py_None, *known_arg = Py_None, *timer = NULL;
    PyObject *mask = NULL;
    double learning_rate;
    PyObject *rate_arg = NULL;
    fm_host_image frame, known, out;
    fm_mog2_step step;
    fm_call call;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O$OOO:apply", kwlist, &frame_arg,
                                     &rate_arg, &fgmask_arg, &known_arg, &timer))
        return NULL;
    fm_image_rule frame_rule = fm_mog2_frame_rule();
    if (fm_mog2_learning_rate_arg(rate_arg, &learning_rate) < 0
        || fm_host_image_check(frame_arg, "frame", &frame_rule, &frame) < 0)
        return NULL;
    fm_image_rule mask_rule = fm_mog2_mask_rule(&frame.shape, 0);
    if (known_arg != Py_None && fm_host_image_check(known_arg, "known_foreground", &mask_rule,
                                                    &known) < 0)
        return NULL;
    mask_rule.writable = 1;
    if (fgmask_arg != Py_None) {
        if (fm_host_image_check(fgmask_arg, "fgmask", &mask_rule, &out) < 0)
            return NULL;
        mask = Py_NewRef(fgmask_arg);
    }
    else {
        npy_intp dims[2] = {frame.shape.height, frame.shape.width};
        if ((mask = PyArray_SimpleNew(2, dims, NPY_UINT8)) == NULL
            || fm_host_image_check(mask, "fgmask", NULL, &out) < 0) {
            Py_XDECREF(mask);
            return NULL;
        }
    }
    if (fm_call_begin(st, &call, "cpu.BackgroundSubtractorMOG2.apply", NULL, timer, NULL,
                      frame.shape.height, frame.shape.width, frame.shape.channels) < 0) {
        Py_DECREF(mask);
        return NULL;
    }
    if (fm_mog2_lock_open(&self->base) < 0)
        goto error;
    (void)fm_mog2_plan(&self->base, &frame.shape, learning_rate, &step);
    if (step.rebuild && rebuild_model(self, &step.geometry) < 0) {
        fm_mog2_unlock(&self->base);
        goto error;
    }
    fm_mog2_model model = fm_mog2_model_at(self->model, &step.geometry);
    if (step.restart)
        memset(model.mode_count, 0, model.stride);
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = fm_mog2_cpu_apply(&step.params, &step.rates, frame.data, frame.pitch,
                           step.geometry.is_float,
                           known_arg != Py_None ? (const unsigned char *)known.data : NULL,
                           known_arg != Py_None ? known.pitch : 0, (unsigned char *)out.data,
                           out.pitch, &model);
    Py_END_ALLOW_THREADS
    if (rc == FM_MOG2_OK)
        fm_mog2_commit(&self->base, &step);
    fm_mog2_unlock(&self->base);
    if (rc != FM_MOG2_OK) {
        PyErr_SetString(PyExc_ValueError, "MOG2 refused the frame or parameters");
        goto error;
    }
    return fm_call_end(st, &call, mask);

error:
    Py_DECREF(mask);
    return fm_call_end(st, &call, NULL);
}

PyDoc_STRVAR(MOG2Cpu_get_background_image_doc,
"get_background_image($self, /, out=None)\n--\n\n"
"The background image (uint8 for uint8 frames, float32 for float32 frames).");

static PyObject *MOG2Cpu_get_background_image(PyObject *op, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"out", NULL};
    fm_MOG2Cpu *self = (fm_MOG2Cpu *)op;
    PyObject *out_arg = Py_None, *out = NULL;
    fm_host_image img;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:get_background_image", kwlist, &out_arg))
        return NULL;
    if (fm_mog2_lock_open(&self->base) < 0)
        return NULL;
    const fm_mog2_geometry g = self->base.geometry;
    if (self->model == NULL) {
        PyErr_SetString(PyExc_ValueError, "there is no model yet: call apply() first");
        goto done;
    }
    if (out_arg != Py_None) {
        fm_image_rule rule = fm_mog2_background_rule(&g);
        if (fm_host_image_check(out_arg, "out", &rule, &img) < 0)
            goto done;
        out = Py_NewRef(out_arg);
    }
    else {
        fm_image_shape shape = fm_mog2_background_shape(&g);
        npy_intp dims[3] = {shape.height, shape.width, shape.channels};
        if ((out = PyArray_SimpleNew(shape.ndim, dims, shape.type_num)) == NULL
            || fm_host_image_check(out, "out", NULL, &img) < 0) {
            Py_CLEAR(out);
            goto done;
        }
    }
    fm_mog2_params params = fm_mog2_settings_params(&self->base.settings);
    fm_mog2_model model = fm_mog2_model_at(self->model, &g);
    (void)fm_mog2_cpu_background(&params, &model, g.is_float, img.data, img.pitch);
done:
    fm_mog2_unlock(&self->base);
    return out;
}

PyDoc_STRVAR(MOG2Cpu_mode_counts_doc,
"mode_counts($self, /)\n--\n\n"
"A new H x W uint8 array: the number of modes each pixel's model uses now\n"
"(a copy, unlike the GPU subtractor's view).");

static PyObject *MOG2Cpu_mode_counts(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    fm_MOG2Cpu *self = (fm_MOG2Cpu *)op;
    if (fm_mog2_lock_open(&self->base) < 0)
        return NULL;
    PyObject *counts = NULL;
    if (self->model == NULL) {
        PyErr_SetString(PyExc_ValueError, "there is no model yet: call apply() first");
    }
    else {
        fm_mog2_model model = fm_mog2_model_at(self->model, &self->base.geometry);
        npy_intp dims[2] = {model.height, model.width};
        if ((counts = PyArray_SimpleNew(2, dims, NPY_UINT8)) != NULL)
            memcpy(PyArray_DATA((PyArrayObject *)counts), model.mode_count, model.stride);
    }
    fm_mog2_unlock(&self->base);
    return counts;
}

/* _state(): the model's arrays as numpy copies, for the benchmark's floor
 * (modes visited per pixel) and for tests; private, so the layout may change. */
static PyObject *model_array(const void *src, int nd, const npy_intp *dims, int type_num)
{
    PyObject *array = PyArray_SimpleNew(nd, (npy_intp *)dims, type_num);
    if (array != NULL)
        memcpy(PyArray_DATA((PyArrayObject *)array), src,
               (size_t)PyArray_NBYTES((PyArrayObject *)array));
    return array;
}

PyDoc_STRVAR(MOG2Cpu_state_doc,
"_state($self, /)\n--\n\n"
"Private: a dict of copies of the model, weight and variance (M, H, W)\n"
"float32, mean (M, C, H, W) float32, mode_count (H, W) uint8 (M = n_mixtures,\n"
"C = channels); modes at or beyond a pixel's mode_count hold stale values.");

static PyObject *MOG2Cpu_state(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    fm_MOG2Cpu *self = (fm_MOG2Cpu *)op;
    PyObject *state = NULL, *item = NULL;
    if (fm_mog2_lock_open(&self->base) < 0)
        return NULL;
    if (self->model == NULL) {
        PyErr_SetString(PyExc_ValueError, "there is no model yet: call apply() first");
        goto error;
    }
    const fm_mog2_geometry g = self->base.geometry;
    fm_mog2_model model = fm_mog2_model_at(self->model, &g);
    const npy_intp modes = g.n_mixtures, h = g.height, w = g.width;
    const npy_intp planes[3] = {modes, h, w};
    const npy_intp means[4] = {modes, g.channels, h, w};
    if ((state = PyDict_New()) == NULL)
        goto error;
    if ((item = model_array(model.weight, 3, planes, NPY_FLOAT32)) == NULL
        || PyDict_SetItemString(state, "weight", item) < 0)
        goto error;
    Py_CLEAR(item);
    if ((item = model_array(model.variance, 3, planes, NPY_FLOAT32)) == NULL
        || PyDict_SetItemString(state, "variance", item) < 0)
        goto error;
    Py_CLEAR(item);
    if ((item = model_array(model.mean, 4, means, NPY_FLOAT32)) == NULL
        || PyDict_SetItemString(state, "mean", item) < 0)
        goto error;
    Py_CLEAR(item);
    if ((item = model_array(model.mode_count, 2, planes + 1, NPY_UINT8)) == NULL
        || PyDict_SetItemString(state, "mode_count", item) < 0)
        goto error;
    Py_CLEAR(item);
    fm_mog2_unlock(&self->base);
    return state;

error:
    Py_XDECREF(item);
    Py_XDECREF(state);
    fm_mog2_unlock(&self->base);
    return NULL;
}

static int MOG2Cpu_traverse(PyObject *op, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(op));
    return 0;
}

static PyMethodDef MOG2Cpu_methods[] = {
    {"apply", (PyCFunction)(void (*)(void))MOG2Cpu_apply, METH_VARARGS | METH_KEYWORDS,
     MOG2Cpu_apply_doc},
    {"get_background_image", (PyCFunction)(void (*)(void))MOG2Cpu_get_background_image,
     METH_VARARGS | METH_KEYWORDS, MOG2Cpu_get_background_image_doc},
    {"getBackgroundImage", (PyCFunction)(void (*)(void))MOG2Cpu_get_background_image,
     METH_VARARGS | METH_KEYWORDS, "OpenCV-style alias of get_background_image."},
    {"mode_counts", MOG2Cpu_mode_counts, METH_NOARGS, MOG2Cpu_mode_counts_doc},
    {"_state", MOG2Cpu_state, METH_NOARGS, MOG2Cpu_state_doc},
    {NULL, NULL, 0, NULL},
};

PyDoc_STRVAR(MOG2Cpu_doc,
"MOG2 on the host from the same per-pixel code as the GPU kernel: numpy in,\n"
"numpy out, the same results as OpenCV's CPU implementation.");

static PyType_Slot MOG2Cpu_slots[] = {
    {Py_tp_new, MOG2Cpu_new},
    {Py_tp_dealloc, fm_mog2_dealloc},
    {Py_tp_traverse, MOG2Cpu_traverse},
    {Py_tp_methods, MOG2Cpu_methods},
    {Py_tp_doc, (void *)MOG2Cpu_doc},
    {0, NULL},
};

PyType_Spec fm_mog2_cpu_spec = {
    .name = "fastmog.cpu.BackgroundSubtractorMOG2",
    .basicsize = sizeof(fm_MOG2Cpu),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = MOG2Cpu_slots,
};
