/* fastmog.BackgroundSubtractorMOG2: OpenCV's CPU MOG2, bit for bit, on the
 * GPU. The model lives in one device allocation made at (re)initialisation;
 * the per-frame path allocates nothing. */
#include "mog2_base.h"

typedef struct fm_MOG2 {
    fm_MOG2Base base;
    int device;
    fm_DeviceBuffer *model;         /* weight | variance | mean | mode_count */
    fm_GpuMat *mask;                /* reused output, H x W uint8 */
    fm_GpuMat *frame_staging;       /* device copy of numpy frames */
    fm_GpuMat *known_staging;       /* device copy of numpy known_foreground */
} fm_MOG2;

static fm_mog2_model model_view(const fm_MOG2 *self)
{
    return fm_mog2_model_at(self->model->ptr, &self->base.geometry);
}

static void release_model(fm_MOG2Base *base)
{
    fm_MOG2 *self = (fm_MOG2 *)base;
    Py_CLEAR(self->model);
    Py_CLEAR(self->mask);
    Py_CLEAR(self->frame_staging);
    Py_CLEAR(self->known_staging);
}

static PyObject *MOG2_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    fm_state *st = fm_state_of_type(type);
    PyObject *device_arg = NULL;
    fm_MOG2 *self = (fm_MOG2 *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    if (fm_mog2_base_init(&self->base, args, kwargs, "BackgroundSubtractorMOG2", &device_arg,
                          release_model) < 0
        || fm_resolve_device(st, device_arg, &self->device) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

/* Replaces the model and the mask buffer for a new frame geometry, zeroed so
 * no byte of the model is ever uninitialised. Nothing changes if an
 * allocation fails. */
static int rebuild_model(fm_state *st, fm_MOG2 *self, const fm_mog2_geometry *g,
                         fm_Stream *stream)
{
    char what[96];
    snprintf(what, sizeof what, "a %dx%dx%d MOG2 model with %d modes", g->height, g->width,
             g->channels, g->n_mixtures);
    fm_DeviceBuffer *model = fm_device_buffer_alloc(st, self->device, fm_mog2_model_bytes(g),
                                                    what);
    if (model == NULL)
        return -1;
    fm_GpuMat *mask = self->mask;
    fm_image_shape mask_shape = {g->height, g->width, 1, 2, NPY_UINT8, 0};
    if (mask == NULL || mask->shape.height != g->height || mask->shape.width != g->width)
        mask = fm_gpumat_new(st, self->device, &mask_shape);
    else
        Py_INCREF(mask);
    if (mask == NULL) {
        Py_DECREF(model);
        return -1;
    }
    cudaError_t err = cudaMemsetAsync(model->ptr, 0, model->size, stream->handle);
    if (err != cudaSuccess || fm_device_buffer_use(st, model, stream, FM_USE_RELEASE_AFTER) < 0) {
        if (err != cudaSuccess)
            fm_cuda_error(st, err, "clearing %s", what);
        Py_DECREF(model);
        Py_DECREF(mask);
        return -1;
    }
    Py_XSETREF(self->model, model);
    Py_XSETREF(self->mask, mask);
    return 0;
}

/* Queues one frame's work; the lock is held and the arguments are checked. */
static PyObject *apply_locked(fm_state *st, fm_MOG2 *self, const fm_mog2_step *step,
                              fm_GpuMat *frame, fm_GpuMat *known, fm_GpuMat *fgmask,
                              fm_Stream *stream, fm_call *call)
{
    if (step->rebuild && rebuild_model(st, self, &step->geometry, stream) < 0)
        return NULL;
    fm_GpuMat *mask = fgmask != NULL ? fgmask : self->mask;
    /* Calls on different streams share the model and the reused mask: this
     * one runs after the earlier ones on the GPU, so they never interleave. */
    if (fm_device_buffer_use(st, self->model, stream, FM_USE_AFTER_EARLIER) < 0
        || fm_device_buffer_use(st, mask->buffer, stream,
                                fgmask == NULL ? FM_USE_AFTER_EARLIER : FM_USE_RELEASE_AFTER) < 0
        || fm_device_buffer_use(st, frame->buffer, stream, FM_USE_RELEASE_AFTER) < 0
        || (known != NULL
            && fm_device_buffer_use(st, known->buffer, stream, FM_USE_RELEASE_AFTER) < 0)
        || fm_call_gpu_begin(st, call) < 0)
        return NULL;
    fm_mog2_geometry g = step->geometry;
    fm_mog2_model model = fm_mog2_model_at(self->model->ptr, &g);
    if (step->restart) {
        cudaError_t err = cudaMemsetAsync(model.mode_count, 0, model.stride, stream->handle);
        if (err != cudaSuccess)
            return fm_cuda_error(st, err, "restarting a MOG2 model");
    }
    fm_image known_image;
    memset(&known_image, 0, sizeof known_image);
    if (known != NULL)
        known_image = fm_gpumat_image(known);
    cudaError_t err = fm_launch_mog2_apply(step->params, step->rates, fm_gpumat_image(frame),
                                           known_image, fm_gpumat_image(mask), model,
                                           stream->handle);
    if (err != cudaSuccess)
        return fm_cuda_error(st, err, "launching MOG2 on a %dx%dx%d frame", g.height, g.width,
                             g.channels);
    if (fm_call_gpu_end(st, call) < 0)
        return NULL;
    fm_mog2_commit(&self->base, step);
    return Py_NewRef(mask);
}

PyDoc_STRVAR(MOG2_apply_doc,
"apply($self, frame, /, learning_rate=-1.0, *, stream, fgmask=None,\n"
"      known_foreground=None, timer=None)\n--\n\n"
"Updates the model with `frame` and returns the foreground mask (uint8:\n"
"0 background, shadow_value shadow, 255 foreground), queued on `stream`.\n\n"
"frame: a GpuMat, a numpy array (uploaded through a pinned staging buffer)\n"
"or any producer's device memory (CuPy, PyTorch, PyNvVideoCodec planes);\n"
"H x W or H x W x C, C in 1, 3, 4; uint8 or float32.\n"
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
    fm_MOG2 *self = (fm_MOG2 *)op;
    PyObject *frame_arg, *stream_arg = NULL, *fgmask_arg = Py_None, *known_arg = Py_None;
    PyObject *timer = NULL, *result = NULL;
    double learning_rate;
    PyObject *rate_arg = NULL;
    fm_GpuMat *frame = NULL, *known = NULL, *fgmask = NULL;
    fm_mog2_step step;
    fm_device_guard guard;
    fm_call call;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O$OOOO:apply", kwlist, &frame_arg,
                                     &rate_arg, &stream_arg, &fgmask_arg, &known_arg, &timer))
        return NULL;
    fm_Stream *stream = fm_require_stream(st, stream_arg, self->device);
    if (stream == NULL)
        return NULL;
    if (fgmask_arg != Py_None && (fgmask = fm_gpumat_check_open(st, fgmask_arg, "fgmask")) == NULL)
        return NULL;
    if (fm_mog2_learning_rate_arg(rate_arg, &learning_rate) < 0)
        return NULL;
    int h, w, c;
    fm_peek_shape(st, frame_arg, &h, &w, &c);
    if (fm_call_begin(st, &call, "BackgroundSubtractorMOG2.apply", "kernel mog2_apply", timer,
                      stream, h > 0 ? h : -1, w, c) < 0)
        return NULL;
    if (fm_device_enter(st, self->device, &guard) < 0)
        return fm_call_end(st, &call, NULL);
    if (fm_mog2_lock_open(&self->base) < 0)
        goto exit_device;
    fm_image_rule frame_rule = fm_mog2_frame_rule();
    frame = fm_as_device_image(st, frame_arg, "frame", &frame_rule, stream,
                               &self->frame_staging, timer);
    if (frame == NULL)
        goto done;
    fm_image_rule mask_rule = fm_mog2_mask_rule(&frame->shape, 0);
    if (known_arg != Py_None
        && (known = fm_as_device_image(st, known_arg, "known_foreground", &mask_rule, stream,
                                       &self->known_staging, timer)) == NULL)
        goto done;
    mask_rule.writable = 1;
    /* Checked again: another thread may have closed it while this one waited
     * for the lock or staged a frame (the GIL was released). */
    if (fgmask != NULL && (fm_gpumat_check_open(st, fgmask_arg, "fgmask") == NULL
                           || fm_image_rule_check(&mask_rule, &fgmask->shape, "fgmask") < 0
                           || fm_check_same_device(fgmask, self->device, "fgmask") < 0))
        goto done;
    if (fm_mog2_plan(&self->base, &frame->shape, learning_rate, &step) < 0)
        goto done;
    result = apply_locked(st, self, &step, frame, known, fgmask, stream, &call);
done:
    fm_mog2_unlock(&self->base);
exit_device:
    fm_device_exit(&guard);
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
    fm_MOG2 *self = (fm_MOG2 *)op;
    PyObject *stream_arg = NULL, *out_arg = Py_None, *timer = NULL;
    fm_GpuMat *out = NULL;
    fm_device_guard guard;
    fm_call call;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$OOO:get_background_image", kwlist,
                                     &stream_arg, &out_arg, &timer))
        return NULL;
    fm_Stream *stream = fm_require_stream(st, stream_arg, self->device);
    if (stream == NULL)
        return NULL;
    const fm_mog2_geometry shown = self->base.geometry;
    if (fm_call_begin(st, &call, "BackgroundSubtractorMOG2.get_background_image",
                      "kernel mog2_background", timer, stream, shown.height, shown.width,
                      shown.channels) < 0)
        return NULL;
    if (fm_device_enter(st, self->device, &guard) < 0)
        return fm_call_end(st, &call, NULL);
    if (fm_mog2_lock_open(&self->base) < 0)
        goto exit_device;
    const fm_mog2_geometry g = self->base.geometry;
    if (self->model == NULL) {
        PyErr_SetString(PyExc_ValueError, "there is no model yet: call apply() first");
        goto error;
    }
    fm_image_shape want = fm_mog2_background_shape(&g);
    if (out_arg != Py_None) {
        fm_image_rule rule = fm_mog2_background_rule(&g);
        if ((out = fm_gpumat_check_open(st, out_arg, "out")) == NULL
            || fm_image_rule_check(&rule, &out->shape, "out") < 0
            || fm_check_same_device(out, self->device, "out") < 0) {
            out = NULL;
            goto error;
        }
        Py_INCREF(out);
    }
    else if ((out = fm_gpumat_new(st, self->device, &want)) == NULL) {
        goto error;
    }
    if (fm_device_buffer_use(st, self->model, stream, FM_USE_AFTER_EARLIER) < 0
        || fm_device_buffer_use(st, out->buffer, stream, FM_USE_RELEASE_AFTER) < 0
        || fm_call_gpu_begin(st, &call) < 0)
        goto error;
    fm_mog2_params params = fm_mog2_settings_params(&self->base.settings);
    cudaError_t err = fm_launch_mog2_background(params, model_view(self), fm_gpumat_image(out),
                                                stream->handle);
    if (err != cudaSuccess) {
        fm_cuda_error(st, err, "computing a MOG2 background image");
        goto error;
    }
    if (fm_call_gpu_end(st, &call) < 0)
        goto error;
    fm_mog2_unlock(&self->base);
    fm_device_exit(&guard);
    return fm_call_end(st, &call, (PyObject *)out);

error:
    fm_mog2_unlock(&self->base);
exit_device:
    fm_device_exit(&guard);
    Py_XDECREF(out);
    return fm_call_end(st, &call, NULL);
}

PyDoc_STRVAR(MOG2_mode_counts_doc,
"mode_counts($self, /)\n--\n\n"
"A read-only H x W uint8 GpuMat view of the number of modes each pixel's\n"
"model uses now (a view of the model, not a copy: it changes with apply()).");

static PyObject *MOG2_mode_counts(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    fm_MOG2 *self = (fm_MOG2 *)op;
    if (fm_mog2_lock_open(&self->base) < 0)
        return NULL;
    PyObject *view = NULL;
    if (self->model == NULL) {
        PyErr_SetString(PyExc_ValueError, "there is no model yet: call apply() first");
    }
    else {
        fm_mog2_model model = model_view(self);
        fm_image_shape shape = {model.height, model.width, 1, 2, NPY_UINT8, 1};
        view = (PyObject *)fm_gpumat_view(fm_state_of(op), self->model,
                                          (char *)model.mode_count, (size_t)model.width, &shape);
    }
    fm_mog2_unlock(&self->base);
    return view;
}

static PyObject *MOG2_get_device(PyObject *op, void *Py_UNUSED(closure))
{
    return PyLong_FromLong(((fm_MOG2 *)op)->device);
}

static PyObject *MOG2_get_model_bytes(PyObject *op, void *Py_UNUSED(closure))
{
    fm_MOG2 *self = (fm_MOG2 *)op;
    return PyLong_FromSize_t(self->model ? self->model->size : 0);
}

static PyObject *MOG2_repr(PyObject *op)
{
    fm_MOG2 *self = (fm_MOG2 *)op;
    const fm_mog2_geometry *g = &self->base.geometry;
    if (self->base.closed)
        return PyUnicode_FromString("<fastmog.BackgroundSubtractorMOG2 closed>");
    if (self->model == NULL)
        return PyUnicode_FromFormat("<fastmog.BackgroundSubtractorMOG2 device=%d no model yet>",
                                    self->device);
    return PyUnicode_FromFormat(
        "<fastmog.BackgroundSubtractorMOG2 device=%d model=%dx%dx%d %s frames=%ld>",
        self->device, g->height, g->width, g->channels, g->is_float ? "float32" : "uint8",
        self->base.frames_seen);
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
    release_model((fm_MOG2Base *)op);
    return 0;
}

static PyMethodDef MOG2_methods[] = {
    {"apply", (PyCFunction)(void (*)(void))MOG2_apply, METH_VARARGS | METH_KEYWORDS,
     MOG2_apply_doc},
    {"get_background_image", (PyCFunction)(void (*)(void))MOG2_get_background_image,
     METH_VARARGS | METH_KEYWORDS, MOG2_get_background_image_doc},
    {"getBackgroundImage", (PyCFunction)(void (*)(void))MOG2_get_background_image,
     METH_VARARGS | METH_KEYWORDS, "OpenCV-style alias of get_background_image."},
    {"mode_counts", MOG2_mode_counts, METH_NOARGS, MOG2_mode_counts_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef MOG2_getset[] = {
    {"device", MOG2_get_device, NULL, "CUDA device of the model.", NULL},
    {"model_bytes", MOG2_get_model_bytes, NULL, "Device bytes the model takes.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyDoc_STRVAR(MOG2_doc,
"Zivkovic's adaptive Gaussian mixture background subtractor, computing\n"
"exactly what OpenCV's CPU cv2.BackgroundSubtractorMOG2 computes, on the GPU.\n"
"Every parameter is a property; a new value takes effect at the next apply().\n"
"Model state: n_mixtures * (2 + channels) floats + 1 byte per pixel, as in\n"
"OpenCV (101 bytes per pixel for BGR with 5 modes).");

static PyType_Slot MOG2_slots[] = {
    {Py_tp_new, MOG2_new},
    {Py_tp_dealloc, fm_mog2_dealloc},
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
