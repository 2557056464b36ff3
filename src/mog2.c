/* fastmog.BackgroundSubtractorMOG2: OpenCV's CPU MOG2, bit for bit, on the
 * GPU. The model lives in one device allocation made at (re)initialisation;
 * the per-frame path allocates nothing. */
#include "mog2_settings.h"

#include <pythread.h>

typedef struct fm_MOG2 {
    PyObject_HEAD
    fm_mog2_settings settings;      /* must follow the head (fm_mog2_object) */
    int device;
    PyThread_type_lock lock;        /* serializes calls; owned */
    long frames_seen;               /* frames since the model (re)started */
    fm_mog2_geometry geometry;      /* what `model` was built for */
    fm_DeviceBuffer *model;         /* weight | variance | mean | mode_count */
    fm_GpuMat *mask;                /* reused output, H x W uint8 */
    fm_GpuMat *frame_staging;       /* device copy of numpy frames */
    fm_GpuMat *known_staging;       /* device copy of numpy known_foreground */
    int closed;
} fm_MOG2;

static size_t align_up(size_t n)
{
    return (n + 255) / 256 * 256;
}

/* Where each array lies in the model buffer. */
static fm_mog2_model model_view(const fm_MOG2 *self)
{
    const fm_mog2_geometry *g = &self->geometry;
    size_t pixels = (size_t)g->width * (size_t)g->height;
    size_t plane = align_up(pixels * (size_t)g->n_mixtures * sizeof(float));
    char *base = self->model->ptr;
    fm_mog2_model m;
    m.weight = (float *)base;
    m.variance = (float *)(base + plane);
    m.mean = (float *)(base + 2 * plane);
    m.mode_count = (unsigned char *)(base + 2 * plane + (size_t)g->channels * plane);
    m.stride = pixels;
    m.width = g->width;
    m.height = g->height;
    m.channels = g->channels;
    return m;
}

static size_t model_bytes(const fm_mog2_geometry *g)
{
    size_t pixels = (size_t)g->width * (size_t)g->height;
    size_t plane = align_up(pixels * (size_t)g->n_mixtures * sizeof(float));
    return (2 + (size_t)g->channels) * plane + pixels;
}

static PyObject *MOG2_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    fm_state *st = fm_state_of_type(type);
    fm_mog2_settings settings;
    PyObject *device_arg = NULL;
    int device;

    if (fm_mog2_settings_parse(&settings, args, kwargs, "BackgroundSubtractorMOG2",
                               &device_arg) < 0)
        return NULL;
    if (fm_resolve_device(st, device_arg, &device) < 0)
        return NULL;
    fm_MOG2 *self = (fm_MOG2 *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->settings = settings;
    self->device = device;
    self->lock = PyThread_allocate_lock();
    if (self->lock == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    return (PyObject *)self;
}

static fm_MOG2 *open_self(PyObject *op)
{
    fm_MOG2 *self = (fm_MOG2 *)op;
    if (self->closed) {
        PyErr_SetString(PyExc_ValueError, "the subtractor is closed");
        return NULL;
    }
    return self;
}

/* A device image for a frame-like argument: a GpuMat as is, a numpy array
 * uploaded into *staging (re-made only when its shape or dtype changes), or a
 * view of a CuPy/PyTorch array. New reference. */
static fm_GpuMat *device_input(fm_state *st, fm_MOG2 *self, PyObject *obj, fm_Stream *stream,
                               fm_GpuMat **staging, const char *argname, PyObject *timer)
{
    if (!PyArray_Check(obj))
        return fm_as_gpumat(st, obj, stream);
    PyArrayObject *a = (PyArrayObject *)obj;
    int nd = PyArray_NDIM(a);
    if (nd != 2 && nd != 3) {
        PyErr_Format(PyExc_ValueError, "%s must be H x W or H x W x C, got %d dimension%s",
                     argname, nd, nd == 1 ? "" : "s");
        return NULL;
    }
    int type_num = PyDataType_ISNOTSWAPPED(PyArray_DESCR(a))
                       ? fm_canonical_type_num(PyArray_DESCR(a)) : -1;
    if (type_num != NPY_UINT8 && type_num != NPY_FLOAT32) {
        PyErr_Format(PyExc_TypeError, "%s must be uint8 or float32, not %R", argname,
                     (PyObject *)PyArray_DESCR(a));
        return NULL;
    }
    npy_intp *dims = PyArray_DIMS(a);
    int channels = nd == 3 ? (int)dims[2] : 1;
    fm_GpuMat *m = *staging;
    if (m == NULL || m->height != dims[0] || m->width != dims[1] || m->channels != channels
        || m->ndim != nd || m->type_num != type_num) {
        if (dims[0] < 1 || dims[1] < 1 || dims[0] > INT32_MAX || dims[1] > INT32_MAX) {
            PyErr_Format(PyExc_ValueError, "%s must not be empty", argname);
            return NULL;
        }
        m = fm_gpumat_new(st, self->device, (int)dims[0], (int)dims[1], channels, nd, type_num);
        if (m == NULL)
            return NULL;
        Py_XSETREF(*staging, m);
    }
    /* A call on another stream must not overwrite what an earlier call's
     * kernel may still be reading. */
    if (fm_device_buffer_order_before(st, m->buffer, stream->handle) < 0
        || fm_gpumat_upload_array(st, m, obj, argname, stream, timer) < 0)
        return NULL;
    return (fm_GpuMat *)Py_NewRef(m);
}

/* Checks a single-channel uint8 image of the frame's size on our device. */
static int check_mask_like(fm_MOG2 *self, fm_GpuMat *m, const fm_GpuMat *frame,
                           const char *argname, int writable)
{
    if (m->type_num != NPY_UINT8 || m->channels != 1) {
        PyErr_Format(PyExc_TypeError, "%s must be single-channel uint8, got %d-channel %s",
                     argname, m->channels, fm_type_name(m->type_num));
        return -1;
    }
    if (m->height != frame->height || m->width != frame->width) {
        PyErr_Format(PyExc_ValueError, "%s is %dx%d but the frame is %dx%d", argname,
                     m->height, m->width, frame->height, frame->width);
        return -1;
    }
    if (m->device != self->device) {
        PyErr_Format(PyExc_ValueError, "%s is on device %d but the subtractor is on device %d",
                     argname, m->device, self->device);
        return -1;
    }
    if (writable && m->readonly) {
        PyErr_Format(PyExc_ValueError, "%s is read-only", argname);
        return -1;
    }
    return 0;
}

/* Replaces the model and the mask buffer for a new frame geometry. Nothing
 * changes if an allocation fails. The device must be current. */
static int rebuild_model(fm_state *st, fm_MOG2 *self, const fm_mog2_geometry *g,
                         fm_Stream *stream)
{
    char what[96];
    snprintf(what, sizeof what, "a %dx%dx%d MOG2 model with %d modes", g->height, g->width,
             g->channels, g->n_mixtures);
    fm_DeviceBuffer *model = fm_device_buffer_alloc(st, self->device, model_bytes(g), what);
    if (model == NULL)
        return -1;
    fm_GpuMat *mask = self->mask;
    if (mask == NULL || mask->height != g->height || mask->width != g->width)
        mask = fm_gpumat_new(st, self->device, g->height, g->width, 1, 2, NPY_UINT8);
    else
        Py_INCREF(mask);
    if (mask == NULL) {
        Py_DECREF(model);
        return -1;
    }
    /* Zero everything once, so no byte of the model is ever uninitialised. */
    cudaError_t err = cudaMemsetAsync(model->ptr, 0, model->size, stream->handle);
    if (err != cudaSuccess || fm_device_buffer_use(st, model, stream) < 0) {
        if (err != cudaSuccess)
            fm_cuda_error(st, err, "clearing %s", what);
        Py_DECREF(model);
        Py_DECREF(mask);
        return -1;
    }
    Py_XSETREF(self->model, model);
    Py_XSETREF(self->mask, mask);
    self->geometry = *g;
    self->frames_seen = 0;
    return 0;
}

/* The body of apply, with the lock held and arguments resolved. */
static PyObject *apply_locked(fm_state *st, fm_MOG2 *self, fm_GpuMat *frame, fm_GpuMat *known,
                              fm_GpuMat *fgmask, double learning_rate, fm_Stream *stream,
                              fm_call *call)
{
    fm_mog2_geometry g = {frame->width, frame->height, frame->channels,
                          frame->type_num == NPY_FLOAT32, self->settings.n_mixtures};
    fm_device_guard guard;
    if (fm_device_enter(st, self->device, &guard) < 0)
        return NULL;
    PyObject *result = NULL;

    if (self->model == NULL
        || fm_mog2_geometry_changed(&self->geometry, g.width, g.height, g.channels, g.is_float,
                                    g.n_mixtures)) {
        if (rebuild_model(st, self, &g, stream) < 0)
            goto done;
    }
    fm_mog2_model model = model_view(self);
    long frames_seen = self->frames_seen;
    if (fm_call_gpu_begin(st, call) < 0)
        goto done;
    if (fm_mog2_needs_reset(frames_seen, learning_rate)) {
        cudaError_t err = cudaMemsetAsync(model.mode_count, 0, model.stride, stream->handle);
        if (err != cudaSuccess) {
            fm_cuda_error(st, err, "restarting a MOG2 model");
            goto done;
        }
        frames_seen = 0;
    }
    frames_seen++;
    double rate = fm_mog2_learning_rate(learning_rate, frames_seen, self->settings.history);
    fm_mog2_params params = fm_mog2_settings_params(&self->settings);
    fm_mog2_rates rates = fm_mog2_make_rates(&params, rate);
    fm_GpuMat *mask = fgmask != NULL ? fgmask : self->mask;

    /* Calls on different streams share the model and the reused mask: order
     * this one after the earlier ones on the GPU, so they never interleave. */
    if (fm_device_buffer_order_before(st, self->model, stream->handle) < 0
        || (fgmask == NULL && fm_device_buffer_order_before(st, mask->buffer, stream->handle) < 0))
        goto done;

    fm_image known_image;
    memset(&known_image, 0, sizeof known_image);
    if (known != NULL)
        known_image = fm_gpumat_image(known);
    if (fm_device_buffer_use(st, self->model, stream) < 0
        || fm_device_buffer_use(st, frame->buffer, stream) < 0
        || fm_device_buffer_use(st, mask->buffer, stream) < 0
        || (known != NULL && fm_device_buffer_use(st, known->buffer, stream) < 0))
        goto done;
    cudaError_t err = fm_launch_mog2_apply(params, rates, fm_gpumat_image(frame), known_image,
                                           fm_gpumat_image(mask), model, stream->handle);
    if (err != cudaSuccess) {
        fm_cuda_error(st, err, "launching MOG2 on a %dx%dx%d frame", frame->height, frame->width,
                      frame->channels);
        goto done;
    }
    if (fm_call_gpu_end(st, call) < 0)
        goto done;
    self->frames_seen = frames_seen;
    result = Py_NewRef(mask);
done:
    fm_device_exit(&guard);
    return result;
}

PyDoc_STRVAR(MOG2_apply_doc,
"apply($self, frame, /, learning_rate=-1.0, *, stream, fgmask=None,\n"
"      known_foreground=None, timer=None)\n--\n\n"
"Updates the model with `frame` and returns the foreground mask (uint8:\n"
"0 background, shadow_value shadow, 255 foreground), queued on `stream`.\n\n"
"frame: a GpuMat, a numpy array (uploaded through a pinned staging buffer)\n"
"or a CuPy/PyTorch array; H x W or H x W x C, C in 1, 3, 4; uint8 or float32.\n"
"A frame of another size, channel count or dtype restarts the model, as in\n"
"OpenCV. learning_rate: negative for automatic (1/min(2*n, history)), 0\n"
"freezes the model, 1 restarts it on every frame.\n"
"The returned mask is a GpuMat the subtractor reuses: the next apply()\n"
"overwrites it. Download or copy it first, or pass your own fgmask=.\n"
"known_foreground: uint8 H x W; non-zero pixels are foreground and not\n"
"learned (OpenCV 4.13+).");

static PyObject *MOG2_apply(PyObject *op, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"", "learning_rate", "stream", "fgmask", "known_foreground",
                             "timer", NULL};
    fm_state *st = fm_state_of(op);
    PyObject *frame_arg, *stream_arg = NULL, *fgmask_arg = Py_None, *known_arg = Py_None;
    PyObject *timer = NULL;
    double learning_rate = -1.0;
    fm_GpuMat *frame = NULL, *known = NULL;
    PyObject *result = NULL;
    fm_call call;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|d$OOOO:apply", kwlist, &frame_arg,
                                     &learning_rate, &stream_arg, &fgmask_arg, &known_arg, &timer))
        return NULL;
    fm_MOG2 *self = open_self(op);
    if (self == NULL)
        return NULL;
    fm_Stream *stream = fm_require_stream(st, stream_arg, self->device);
    if (stream == NULL || fm_mog2_check_learning_rate(learning_rate) < 0)
        return NULL;
    fm_GpuMat *fgmask = NULL;
    if (fgmask_arg != Py_None && (fgmask = fm_gpumat_check_open(st, fgmask_arg, "fgmask")) == NULL)
        return NULL;

    int frame_h = -1, frame_w = 0, frame_c = 0;
    if (PyArray_Check(frame_arg) && PyArray_NDIM((PyArrayObject *)frame_arg) >= 2) {
        frame_h = (int)PyArray_DIM((PyArrayObject *)frame_arg, 0);
        frame_w = (int)PyArray_DIM((PyArrayObject *)frame_arg, 1);
        frame_c = PyArray_NDIM((PyArrayObject *)frame_arg) == 3
                      ? (int)PyArray_DIM((PyArrayObject *)frame_arg, 2) : 1;
    }
    else if (Py_IS_TYPE(frame_arg, st->GpuMat_type)) {
        frame_h = ((fm_GpuMat *)frame_arg)->height;
        frame_w = ((fm_GpuMat *)frame_arg)->width;
        frame_c = ((fm_GpuMat *)frame_arg)->channels;
    }
    if (fm_call_begin(st, &call, "BackgroundSubtractorMOG2.apply", "kernel mog2_apply", timer,
                      stream, frame_h, frame_w, frame_c) < 0)
        return NULL;
    fm_lock_acquire(self->lock);
    if (self->closed) {
        PyErr_SetString(PyExc_ValueError, "the subtractor is closed");
        goto done;
    }
    frame = device_input(st, self, frame_arg, stream, &self->frame_staging, "frame", timer);
    if (frame == NULL)
        goto done;
    if ((frame->type_num != NPY_UINT8 && frame->type_num != NPY_FLOAT32)
        || (frame->channels != 1 && frame->channels != 3 && frame->channels != 4)) {
        PyErr_Format(PyExc_TypeError,
                     "frame must be uint8 or float32 with 1, 3 or 4 channels, got %d-channel %s",
                     frame->channels, fm_type_name(frame->type_num));
        goto done;
    }
    if (frame->device != self->device) {
        PyErr_Format(PyExc_ValueError, "frame is on device %d but the subtractor is on device %d",
                     frame->device, self->device);
        goto done;
    }
    if (known_arg != Py_None) {
        known = device_input(st, self, known_arg, stream, &self->known_staging,
                             "known_foreground", timer);
        if (known == NULL || check_mask_like(self, known, frame, "known_foreground", 0) < 0)
            goto done;
    }
    if (fgmask != NULL && check_mask_like(self, fgmask, frame, "fgmask", 1) < 0)
        goto done;
    result = apply_locked(st, self, frame, known, fgmask, learning_rate, stream, &call);
done:
    PyThread_release_lock(self->lock);
    Py_XDECREF(frame);
    Py_XDECREF(known);
    return fm_call_end(st, &call, result);
}

PyDoc_STRVAR(MOG2_get_background_image_doc,
"get_background_image($self, /, *, stream, out=None, timer=None)\n--\n\n"
"The background image as OpenCV's CPU computes it (the weighted mean of the\n"
"background modes), queued on `stream`: uint8 for uint8 frames, float32 for\n"
"float32 frames, with the frames' channels. Written into `out` if given.");

static PyObject *MOG2_get_background_image(PyObject *op, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"stream", "out", "timer", NULL};
    fm_state *st = fm_state_of(op);
    PyObject *stream_arg = NULL, *out_arg = Py_None, *timer = NULL;
    fm_GpuMat *out = NULL;
    fm_device_guard guard;
    fm_call call;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$OOO:get_background_image", kwlist,
                                     &stream_arg, &out_arg, &timer))
        return NULL;
    fm_MOG2 *self = open_self(op);
    if (self == NULL)
        return NULL;
    fm_Stream *stream = fm_require_stream(st, stream_arg, self->device);
    if (stream == NULL)
        return NULL;
    if (fm_call_begin(st, &call, "BackgroundSubtractorMOG2.get_background_image",
                      "kernel mog2_background", timer, stream, self->geometry.height,
                      self->geometry.width, self->geometry.channels) < 0)
        return NULL;
    fm_lock_acquire(self->lock);
    const fm_mog2_geometry g = self->geometry;
    int type_num = g.is_float ? NPY_FLOAT32 : NPY_UINT8;
    if (self->model == NULL) {
        PyErr_SetString(PyExc_ValueError, "there is no model yet: call apply() first");
        goto error;
    }
    if (out_arg != Py_None) {
        if ((out = fm_gpumat_check_open(st, out_arg, "out")) == NULL)
            goto error;
        if (out->height != g.height || out->width != g.width || out->channels != g.channels
            || out->type_num != type_num || out->readonly || out->device != self->device) {
            PyErr_Format(PyExc_ValueError, "out must be a writable %dx%dx%d %s GpuMat on device %d",
                         g.height, g.width, g.channels, fm_type_name(type_num), self->device);
            out = NULL;
            goto error;
        }
        Py_INCREF(out);
    }
    else {
        out = fm_gpumat_new(st, self->device, g.height, g.width, g.channels,
                            g.channels == 1 ? 2 : 3, type_num);
        if (out == NULL)
            goto error;
    }
    if (fm_device_enter(st, self->device, &guard) < 0)
        goto error;
    cudaError_t err = cudaSuccess;
    if (fm_device_buffer_order_before(st, self->model, stream->handle) == 0
        && fm_device_buffer_use(st, self->model, stream) == 0
        && fm_device_buffer_use(st, out->buffer, stream) == 0
        && fm_call_gpu_begin(st, &call) == 0) {
        err = fm_launch_mog2_background(fm_mog2_settings_params(&self->settings),
                                        model_view(self), fm_gpumat_image(out), stream->handle);
        if (err != cudaSuccess)
            fm_cuda_error(st, err, "computing a MOG2 background image");
        else
            (void)fm_call_gpu_end(st, &call);
    }
    fm_device_exit(&guard);
    if (PyErr_Occurred())
        goto error;
    PyThread_release_lock(self->lock);
    return fm_call_end(st, &call, (PyObject *)out);

error:
    PyThread_release_lock(self->lock);
    Py_XDECREF(out);
    return fm_call_end(st, &call, NULL);
}

PyDoc_STRVAR(MOG2_mode_counts_doc,
"mode_counts($self, /)\n--\n\n"
"A read-only H x W uint8 GpuMat view of the number of modes each pixel's\n"
"model uses now (a view of the model, not a copy: it changes with apply()).");

static PyObject *MOG2_mode_counts(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    fm_MOG2 *self = open_self(op);
    if (self == NULL)
        return NULL;
    if (self->model == NULL) {
        PyErr_SetString(PyExc_ValueError, "there is no model yet: call apply() first");
        return NULL;
    }
    fm_mog2_model model = model_view(self);
    return (PyObject *)fm_gpumat_view(fm_state_of(op), self->model, (char *)model.mode_count,
                                      (size_t)model.width, model.height, model.width, 1, 2,
                                      NPY_UINT8, 1);
}

PyDoc_STRVAR(MOG2_reset_doc,
"reset($self, /)\n--\n\n"
"Forgets the model: the next apply() starts a new one (no GPU work now).");

static PyObject *MOG2_reset(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    fm_MOG2 *self = open_self(op);
    if (self == NULL)
        return NULL;
    fm_lock_acquire(self->lock);
    self->frames_seen = 0;
    PyThread_release_lock(self->lock);
    Py_RETURN_NONE;
}

static void release_buffers(fm_MOG2 *self)
{
    Py_CLEAR(self->model);
    Py_CLEAR(self->mask);
    Py_CLEAR(self->frame_staging);
    Py_CLEAR(self->known_staging);
}

PyDoc_STRVAR(MOG2_close_doc,
"close($self, /)\n--\n\n"
"Releases the model and buffers once the GPU work queued on them is done.\n"
"A mask returned earlier stays valid while you hold it. Idempotent.");

static PyObject *MOG2_close(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    fm_MOG2 *self = (fm_MOG2 *)op;
    fm_lock_acquire(self->lock);
    self->closed = 1;
    release_buffers(self);
    self->geometry.width = 0;
    PyThread_release_lock(self->lock);
    Py_RETURN_NONE;
}

static PyObject *MOG2_enter(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    if (open_self(op) == NULL)
        return NULL;
    return Py_NewRef(op);
}

static PyObject *MOG2_exit(PyObject *op, PyObject *Py_UNUSED(args))
{
    return MOG2_close(op, NULL);
}

static PyObject *MOG2_get_frame_count(PyObject *op, void *Py_UNUSED(closure))
{
    return PyLong_FromLong(((fm_MOG2 *)op)->frames_seen);
}

static PyObject *MOG2_get_device(PyObject *op, void *Py_UNUSED(closure))
{
    return PyLong_FromLong(((fm_MOG2 *)op)->device);
}

static PyObject *MOG2_get_closed(PyObject *op, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(((fm_MOG2 *)op)->closed);
}

static PyObject *MOG2_get_model_bytes(PyObject *op, void *Py_UNUSED(closure))
{
    fm_MOG2 *self = (fm_MOG2 *)op;
    return PyLong_FromSize_t(self->model ? self->model->size : 0);
}

static PyObject *MOG2_repr(PyObject *op)
{
    fm_MOG2 *self = (fm_MOG2 *)op;
    if (self->closed)
        return PyUnicode_FromString("<fastmog.BackgroundSubtractorMOG2 closed>");
    if (self->model == NULL)
        return PyUnicode_FromFormat("<fastmog.BackgroundSubtractorMOG2 device=%d no model yet>",
                                    self->device);
    return PyUnicode_FromFormat(
        "<fastmog.BackgroundSubtractorMOG2 device=%d model=%dx%dx%d %s frames=%ld>",
        self->device, self->geometry.height, self->geometry.width, self->geometry.channels,
        self->geometry.is_float ? "float32" : "uint8", self->frames_seen);
}

static int MOG2_traverse(PyObject *op, visitproc visit, void *arg)
{
    fm_MOG2 *self = (fm_MOG2 *)op;
    Py_VISIT(self->model);
    Py_VISIT(self->mask);
    Py_VISIT(self->frame_staging);
    Py_VISIT(self->known_staging);
    Py_VISIT(Py_TYPE(op));
    return 0;
}

static int MOG2_clear(PyObject *op)
{
    release_buffers((fm_MOG2 *)op);
    return 0;
}

static void MOG2_dealloc(PyObject *op)
{
    fm_MOG2 *self = (fm_MOG2 *)op;
    PyTypeObject *tp = Py_TYPE(op);
    PyObject_GC_UnTrack(op);
    release_buffers(self);
    if (self->lock != NULL)
        PyThread_free_lock(self->lock);
    tp->tp_free(op);
    Py_DECREF(tp);
}

static PyMethodDef MOG2_methods[] = {
    {"apply", (PyCFunction)(void (*)(void))MOG2_apply, METH_VARARGS | METH_KEYWORDS,
     MOG2_apply_doc},
    {"get_background_image", (PyCFunction)(void (*)(void))MOG2_get_background_image,
     METH_VARARGS | METH_KEYWORDS, MOG2_get_background_image_doc},
    {"getBackgroundImage", (PyCFunction)(void (*)(void))MOG2_get_background_image,
     METH_VARARGS | METH_KEYWORDS, "OpenCV-style alias of get_background_image."},
    {"reset", MOG2_reset, METH_NOARGS, MOG2_reset_doc},
    {"mode_counts", MOG2_mode_counts, METH_NOARGS, MOG2_mode_counts_doc},
    {"clear", MOG2_reset, METH_NOARGS, "OpenCV-style alias of reset."},
    {"close", MOG2_close, METH_NOARGS, MOG2_close_doc},
    {"__enter__", MOG2_enter, METH_NOARGS, NULL},
    {"__exit__", MOG2_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef MOG2_getset[] = {
    {"frame_count", MOG2_get_frame_count, NULL, "Frames in the current model.", NULL},
    {"device", MOG2_get_device, NULL, "CUDA device of the model.", NULL},
    {"closed", MOG2_get_closed, NULL, "True once close() has run.", NULL},
    {"model_bytes", MOG2_get_model_bytes, NULL, "Device bytes the model takes.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyDoc_STRVAR(MOG2_doc,
"BackgroundSubtractorMOG2(history=500, var_threshold=16.0, detect_shadows=True, *,\n"
"    n_mixtures=5, background_ratio=0.9, var_threshold_gen=9.0, var_init=15.0,\n"
"    var_min=4.0, var_max=75.0, complexity_reduction_threshold=0.05,\n"
"    shadow_value=127, shadow_threshold=0.5, device=None)\n--\n\n"
"Zivkovic's adaptive Gaussian mixture background subtractor, computing\n"
"exactly what OpenCV's CPU cv2.BackgroundSubtractorMOG2 computes, on the GPU.\n"
"Every parameter is a property; a new value takes effect at the next apply().\n"
"Model state: n_mixtures * (2 + channels) floats + 1 byte per pixel, as in\n"
"OpenCV (101 bytes per pixel for BGR with 5 modes).");

static PyType_Slot MOG2_slots[] = {
    {Py_tp_new, MOG2_new},
    {Py_tp_dealloc, MOG2_dealloc},
    {Py_tp_traverse, MOG2_traverse},
    {Py_tp_clear, MOG2_clear},
    {Py_tp_repr, MOG2_repr},
    {Py_tp_methods, MOG2_methods},
    {Py_tp_getset, MOG2_getset},
    {Py_tp_doc, (void *)MOG2_doc},
    {0, NULL},
};

PyType_Spec fm_mog2_spec = {
    .name = "fastmog.BackgroundSubtractorMOG2",
    .basicsize = sizeof(fm_MOG2),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = MOG2_slots,
};
