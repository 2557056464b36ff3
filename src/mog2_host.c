/* fastmog.cpu.BackgroundSubtractorMOG2: the same algorithm on the host, from
 * the same per-pixel code (cuda/mog2_pixel.h). It is the tests' oracle and
 * lets the main job run where there is no GPU. */
#include "mog2_settings.h"
#include "mog2_cpu.h"

#include <pythread.h>

typedef struct fm_MOG2Host {
    PyObject_HEAD
    fm_mog2_settings settings;      /* must follow the head (fm_mog2_object) */
    PyThread_type_lock lock;        /* serializes calls; owned */
    long frames_seen;
    fm_mog2_geometry geometry;
    float *weight, *variance, *mean;    /* owned, PyMem_Raw */
    unsigned char *mode_count;          /* owned, PyMem_Raw */
    int closed;
} fm_MOG2Host;

static void free_model(fm_MOG2Host *self)
{
    PyMem_RawFree(self->weight);
    PyMem_RawFree(self->variance);
    PyMem_RawFree(self->mean);
    PyMem_RawFree(self->mode_count);
    self->weight = self->variance = self->mean = NULL;
    self->mode_count = NULL;
    self->geometry.width = 0;
}

static PyObject *MOG2Host_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    fm_mog2_settings settings;
    if (fm_mog2_settings_parse(&settings, args, kwargs, "BackgroundSubtractorMOG2", NULL) < 0)
        return NULL;
    fm_MOG2Host *self = (fm_MOG2Host *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->settings = settings;
    self->lock = PyThread_allocate_lock();
    if (self->lock == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    return (PyObject *)self;
}

/* A numpy image with contiguous pixels in each row; gives the row pitch. */
static int check_image(PyObject *obj, const char *argname, int writable, int *height,
                       int *width, int *channels, int *type_num, size_t *pitch)
{
    if (!PyArray_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be a numpy array, not %.200s", argname,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    PyArrayObject *a = (PyArrayObject *)obj;
    int nd = PyArray_NDIM(a);
    if (nd != 2 && nd != 3) {
        PyErr_Format(PyExc_ValueError, "%s must be H x W or H x W x C, got %d dimension%s",
                     argname, nd, nd == 1 ? "" : "s");
        return -1;
    }
    npy_intp *dims = PyArray_DIMS(a), *strides = PyArray_STRIDES(a);
    *type_num = PyDataType_ISNOTSWAPPED(PyArray_DESCR(a))
                    ? fm_canonical_type_num(PyArray_DESCR(a)) : -1;
    if (*type_num != NPY_UINT8 && *type_num != NPY_FLOAT32) {
        PyErr_Format(PyExc_TypeError, "%s must be uint8 or float32, not %R", argname,
                     (PyObject *)PyArray_DESCR(a));
        return -1;
    }
    int c = nd == 3 ? (int)dims[2] : 1;
    if (dims[0] < 1 || dims[1] < 1 || dims[0] > INT32_MAX || dims[1] > INT32_MAX / 16) {
        PyErr_Format(PyExc_ValueError, "%s must not be empty", argname);
        return -1;
    }
    if (c != 1 && c != 3 && c != 4) {
        PyErr_Format(PyExc_ValueError, "%s must have 1, 3 or 4 channels, got %d", argname, c);
        return -1;
    }
    npy_intp elem = PyArray_ITEMSIZE(a);
    npy_intp row_bytes = dims[1] * c * elem;
    int pixels_ok = (dims[1] == 1 || strides[1] == c * elem) && (nd == 2 || c == 1 || strides[2] == elem);
    npy_intp row_stride = dims[0] == 1 ? row_bytes : strides[0];
    if (!pixels_ok || row_stride < row_bytes) {
        PyErr_Format(PyExc_ValueError,
                     "%s must have contiguous pixels within each row and rows in order; "
                     "use numpy.ascontiguousarray()", argname);
        return -1;
    }
    if (writable && !PyArray_ISWRITEABLE(a)) {
        PyErr_Format(PyExc_ValueError, "%s is read-only", argname);
        return -1;
    }
    *height = (int)dims[0];
    *width = (int)dims[1];
    *channels = c;
    *pitch = (size_t)row_stride;
    return 0;
}

static int check_mask_like(PyObject *obj, const char *argname, int writable, int height,
                           int width, size_t *pitch)
{
    int h, w, c, type_num;
    if (check_image(obj, argname, writable, &h, &w, &c, &type_num, pitch) < 0)
        return -1;
    if (type_num != NPY_UINT8 || c != 1) {
        PyErr_Format(PyExc_TypeError, "%s must be single-channel uint8", argname);
        return -1;
    }
    if (h != height || w != width) {
        PyErr_Format(PyExc_ValueError, "%s is %dx%d but the frame is %dx%d", argname, h, w,
                     height, width);
        return -1;
    }
    return 0;
}

static int rebuild_model(fm_MOG2Host *self, const fm_mog2_geometry *g)
{
    size_t planes = (size_t)g->n_mixtures * (size_t)g->width * (size_t)g->height;
    float *weight = PyMem_RawCalloc(planes, sizeof(float));
    float *variance = PyMem_RawCalloc(planes, sizeof(float));
    float *mean = PyMem_RawCalloc(planes * (size_t)g->channels, sizeof(float));
    unsigned char *mode_count = PyMem_RawCalloc((size_t)g->width * (size_t)g->height, 1);
    if (weight == NULL || variance == NULL || mean == NULL || mode_count == NULL) {
        PyMem_RawFree(weight);
        PyMem_RawFree(variance);
        PyMem_RawFree(mean);
        PyMem_RawFree(mode_count);
        PyErr_Format(PyExc_MemoryError, "cannot allocate a %dx%dx%d MOG2 model", g->height,
                     g->width, g->channels);
        return -1;
    }
    free_model(self);
    self->weight = weight;
    self->variance = variance;
    self->mean = mean;
    self->mode_count = mode_count;
    self->geometry = *g;
    self->frames_seen = 0;
    return 0;
}

PyDoc_STRVAR(MOG2Host_apply_doc,
"apply($self, frame, /, learning_rate=-1.0, *, fgmask=None, known_foreground=None,\n"
"      timer=None)\n--\n\n"
"Updates the model with a numpy frame and returns the uint8 mask (a new\n"
"array, or `fgmask`). Same semantics as fastmog.BackgroundSubtractorMOG2.apply,\n"
"without a stream: the work is done when the call returns.");

static PyObject *MOG2Host_apply(PyObject *op, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"", "learning_rate", "fgmask", "known_foreground", "timer", NULL};
    fm_MOG2Host *self = (fm_MOG2Host *)op;
    fm_state *st = fm_state_of(op);
    PyObject *frame, *fgmask = Py_None, *known = Py_None, *mask = NULL, *timer = NULL;
    double learning_rate = -1.0;
    int height, width, channels, type_num;
    size_t frame_pitch, mask_pitch, known_pitch = 0;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|d$OOO:apply", kwlist, &frame,
                                     &learning_rate, &fgmask, &known, &timer))
        return NULL;
    if (self->closed) {
        PyErr_SetString(PyExc_ValueError, "the subtractor is closed");
        return NULL;
    }
    if (fm_mog2_check_learning_rate(learning_rate) < 0
        || check_image(frame, "frame", 0, &height, &width, &channels, &type_num, &frame_pitch) < 0)
        return NULL;
    if (known != Py_None
        && check_mask_like(known, "known_foreground", 0, height, width, &known_pitch) < 0)
        return NULL;
    if (fgmask != Py_None) {
        if (check_mask_like(fgmask, "fgmask", 1, height, width, &mask_pitch) < 0)
            return NULL;
        mask = Py_NewRef(fgmask);
    }
    else {
        npy_intp dims[2] = {height, width};
        mask = PyArray_SimpleNew(2, dims, NPY_UINT8);
        if (mask == NULL)
            return NULL;
        mask_pitch = (size_t)width;
    }

    fm_call call;
    if (fm_call_begin(st, &call, "cpu.BackgroundSubtractorMOG2.apply", NULL, timer, NULL,
                      height, width, channels) < 0) {
        Py_DECREF(mask);
        return NULL;
    }
    fm_lock_acquire(self->lock);
    fm_mog2_geometry g = {width, height, channels, type_num == NPY_FLOAT32,
                          self->settings.n_mixtures};
    if ((self->weight == NULL
         || fm_mog2_geometry_changed(&self->geometry, g.width, g.height, g.channels, g.is_float,
                                     g.n_mixtures))
        && rebuild_model(self, &g) < 0) {
        PyThread_release_lock(self->lock);
        Py_DECREF(mask);
        return fm_call_end(st, &call, NULL);
    }
    if (fm_mog2_needs_reset(self->frames_seen, learning_rate)) {
        memset(self->mode_count, 0, (size_t)width * (size_t)height);
        self->frames_seen = 0;
    }
    long frames_seen = self->frames_seen + 1;
    double rate = fm_mog2_learning_rate(learning_rate, frames_seen, self->settings.history);
    fm_mog2_params params = fm_mog2_settings_params(&self->settings);
    const void *frame_data = PyArray_DATA((PyArrayObject *)frame);
    const unsigned char *known_data =
        known != Py_None ? PyArray_DATA((PyArrayObject *)known) : NULL;
    unsigned char *mask_data = PyArray_DATA((PyArrayObject *)mask);
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = fm_mog2_cpu_apply(&params, rate, frame_data, frame_pitch, width, height, channels,
                           g.is_float, known_data, known_pitch, mask_data, mask_pitch,
                           self->weight, self->variance, self->mean, self->mode_count);
    Py_END_ALLOW_THREADS
    if (rc == FM_MOG2_OK)
        self->frames_seen = frames_seen;
    PyThread_release_lock(self->lock);
    if (rc != FM_MOG2_OK) {
        Py_DECREF(mask);
        PyErr_SetString(PyExc_ValueError, "MOG2 refused the frame or parameters");
        return fm_call_end(st, &call, NULL);
    }
    return fm_call_end(st, &call, mask);
}

PyDoc_STRVAR(MOG2Host_get_background_image_doc,
"get_background_image($self, /, out=None)\n--\n\n"
"The background image (uint8 for uint8 frames, float32 for float32 frames).");

static PyObject *MOG2Host_get_background_image(PyObject *op, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"out", NULL};
    fm_MOG2Host *self = (fm_MOG2Host *)op;
    PyObject *out_arg = Py_None, *out = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:get_background_image", kwlist, &out_arg))
        return NULL;
    fm_lock_acquire(self->lock);
    const fm_mog2_geometry g = self->geometry;
    int type_num = g.is_float ? NPY_FLOAT32 : NPY_UINT8;
    size_t pitch = 0;
    if (self->closed || self->weight == NULL) {
        PyErr_SetString(PyExc_ValueError,
                        self->closed ? "the subtractor is closed"
                                     : "there is no model yet: call apply() first");
        goto done;
    }
    if (out_arg != Py_None) {
        int h, w, c, t;
        if (check_image(out_arg, "out", 1, &h, &w, &c, &t, &pitch) < 0)
            goto done;
        if (h != g.height || w != g.width || c != g.channels || t != type_num) {
            PyErr_Format(PyExc_ValueError, "out must be %dx%dx%d %s", g.height, g.width,
                         g.channels, fm_type_name(type_num));
            goto done;
        }
        out = Py_NewRef(out_arg);
    }
    else {
        npy_intp dims[3] = {g.height, g.width, g.channels};
        out = PyArray_SimpleNew(g.channels == 1 ? 2 : 3, dims, type_num);
        if (out == NULL)
            goto done;
        pitch = (size_t)g.width * (size_t)g.channels * (g.is_float ? 4 : 1);
    }
    fm_mog2_params params = fm_mog2_settings_params(&self->settings);
    (void)fm_mog2_cpu_background(&params, g.width, g.height, g.channels, self->weight, self->mean,
                                 self->mode_count, g.is_float, PyArray_DATA((PyArrayObject *)out),
                                 pitch);
done:
    PyThread_release_lock(self->lock);
    return out;
}

static PyObject *MOG2Host_reset(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    fm_MOG2Host *self = (fm_MOG2Host *)op;
    fm_lock_acquire(self->lock);
    self->frames_seen = 0;
    PyThread_release_lock(self->lock);
    Py_RETURN_NONE;
}

static PyObject *MOG2Host_close(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    fm_MOG2Host *self = (fm_MOG2Host *)op;
    fm_lock_acquire(self->lock);
    self->closed = 1;
    free_model(self);
    PyThread_release_lock(self->lock);
    Py_RETURN_NONE;
}

static PyObject *MOG2Host_enter(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    return Py_NewRef(op);
}

static PyObject *MOG2Host_exit(PyObject *op, PyObject *Py_UNUSED(args))
{
    return MOG2Host_close(op, NULL);
}

static PyObject *MOG2Host_get_frame_count(PyObject *op, void *Py_UNUSED(closure))
{
    return PyLong_FromLong(((fm_MOG2Host *)op)->frames_seen);
}

static PyObject *MOG2Host_get_closed(PyObject *op, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(((fm_MOG2Host *)op)->closed);
}

static void MOG2Host_dealloc(PyObject *op)
{
    fm_MOG2Host *self = (fm_MOG2Host *)op;
    PyTypeObject *tp = Py_TYPE(op);
    free_model(self);
    if (self->lock != NULL)
        PyThread_free_lock(self->lock);
    tp->tp_free(op);
    Py_DECREF(tp);
}

static PyMethodDef MOG2Host_methods[] = {
    {"apply", (PyCFunction)(void (*)(void))MOG2Host_apply, METH_VARARGS | METH_KEYWORDS,
     MOG2Host_apply_doc},
    {"get_background_image", (PyCFunction)(void (*)(void))MOG2Host_get_background_image,
     METH_VARARGS | METH_KEYWORDS, MOG2Host_get_background_image_doc},
    {"getBackgroundImage", (PyCFunction)(void (*)(void))MOG2Host_get_background_image,
     METH_VARARGS | METH_KEYWORDS, "OpenCV-style alias of get_background_image."},
    {"reset", MOG2Host_reset, METH_NOARGS, "reset($self, /)\n--\n\nForgets the model."},
    {"clear", MOG2Host_reset, METH_NOARGS, "OpenCV-style alias of reset."},
    {"close", MOG2Host_close, METH_NOARGS, "close($self, /)\n--\n\nFrees the model."},
    {"__enter__", MOG2Host_enter, METH_NOARGS, NULL},
    {"__exit__", MOG2Host_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef MOG2Host_getset[] = {
    {"frame_count", MOG2Host_get_frame_count, NULL, "Frames in the current model.", NULL},
    {"closed", MOG2Host_get_closed, NULL, "True once close() has run.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyDoc_STRVAR(MOG2Host_doc,
"BackgroundSubtractorMOG2(history=500, var_threshold=16.0, detect_shadows=True, *,\n"
"    n_mixtures=5, background_ratio=0.9, var_threshold_gen=9.0, var_init=15.0,\n"
"    var_min=4.0, var_max=75.0, complexity_reduction_threshold=0.05,\n"
"    shadow_value=127, shadow_threshold=0.5)\n--\n\n"
"MOG2 on the host from the same per-pixel code as the GPU kernel: numpy in,\n"
"numpy out, the same results as OpenCV's CPU implementation.");

static PyType_Slot MOG2Host_slots[] = {
    {Py_tp_new, MOG2Host_new},
    {Py_tp_dealloc, MOG2Host_dealloc},
    {Py_tp_methods, MOG2Host_methods},
    {Py_tp_getset, MOG2Host_getset},
    {Py_tp_doc, (void *)MOG2Host_doc},
    {0, NULL},
};

PyType_Spec fm_mog2_host_spec = {
    .name = "fastmog.cpu.BackgroundSubtractorMOG2",
    .basicsize = sizeof(fm_MOG2Host),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = MOG2Host_slots,
};
