/* The front door: whatever the user passed becomes a device image here, checked
 * once, before anything is queued. */
#include "fastmog.h"
#include "docstrings.h"

/* ---- the front door ------------------------------------------------------------ */

void fm_peek_shape(fm_state *st, PyObject *obj, int *height, int *width, int *channels)
{
    *height = *width = *channels = 0;
    if (PyArray_Check(obj) && PyArray_NDIM((PyArrayObject *)obj) >= 2) {
        PyArrayObject *a = (PyArrayObject *)obj;
        npy_intp h = PyArray_DIM(a, 0), w = PyArray_DIM(a, 1);
        npy_intp c = PyArray_NDIM(a) == 3 ? PyArray_DIM(a, 2) : 1;
        if (h <= INT32_MAX && w <= INT32_MAX && c <= INT32_MAX) {
            *height = (int)h;
            *width = (int)w;
            *channels = (int)c;
        }
    }
    else if (Py_IS_TYPE(obj, st->GpuMat_type)) {
        const fm_image_shape *s = &((fm_GpuMat *)obj)->shape;
        *height = s->height;
        *width = s->width;
        *channels = s->channels;
    }
}

/* Uploads a numpy image into *staging (re-made for a new shape) as a nested
 * timed call. New reference. */
static fm_GpuMat *upload_to_staging(fm_state *st, const fm_host_image *src, fm_Stream *stream,
                                    fm_GpuMat **staging, PyObject *timer)
{
    fm_GpuMat *m = staging != NULL ? *staging : NULL;
    const fm_image_shape *want = &src->shape;
    if (m == NULL || m->shape.height != want->height || m->shape.width != want->width
        || m->shape.channels != want->channels || m->shape.ndim != want->ndim
        || m->shape.type_num != want->type_num) {
        if ((m = fm_gpumat_new(st, stream->device, want)) == NULL)
            return NULL;
        if (staging != NULL)
            Py_XSETREF(*staging, (fm_GpuMat *)Py_NewRef(m));
    }
    else {
        Py_INCREF(m);
    }
    fm_call call;
    if (fm_call_begin(st, &call, "GpuMat.upload", "memcpy HtoD", timer, stream, want->height,
                      want->width, want->channels) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    /* A call on another stream must not overwrite what an earlier call's
     * kernel may still be reading. */
    int rc = fm_call_gpu_queue(st, &call) < 0
                 ? -1 : fm_upload(st, m, src, stream, FM_USE_AFTER_EARLIER, &call);
    if (fm_call_end_int(st, &call, rc) < 0)
        Py_CLEAR(m);
    return m;
}

fm_GpuMat *fm_as_device_image(fm_state *st, PyObject *obj, const char *argname,
                              const fm_image_rule *rule, fm_Stream *stream,
                              fm_GpuMat **staging, PyObject *timer)
{
    fm_GpuMat *m;
    if (PyArray_Check(obj)) {
        fm_host_image src;
        if (fm_host_image_check(obj, argname, rule, &src) < 0)
            return NULL;
        return upload_to_staging(st, &src, stream, staging, timer);
    }
    if (Py_IS_TYPE(obj, st->GpuMat_type)) {
        /* A view of our own, not the caller's object: another thread may close
         * that one while this call stages other input with the GIL released. */
        fm_GpuMat *given = fm_gpumat_check_open(st, obj, argname);
        if (given == NULL || (m = fm_gpumat_view(st, given->buffer, given->data, given->pitch,
                                                  &given->shape)) == NULL)
            return NULL;
    }
    else if ((m = fm_view_device_array(st, obj, argname, stream)) == NULL) {
        return NULL;
    }
    if (m->device != stream->device) {
        PyErr_Format(PyExc_ValueError, "%s is on device %d but the stream is on device %d",
                     argname, m->device, stream->device);
        Py_DECREF(m);
        return NULL;
    }
    if (rule != NULL && fm_image_rule_check(rule, &m->shape, argname) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

/* ---- fastmog.asgpumat ------------------------------------------------------------ */

static PyObject *asgpumat(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"", "stream", NULL};
    fm_state *st = fm_state_of_module(module);
    PyObject *obj, *stream_arg = NULL;
    fm_device_guard guard;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$O:asgpumat", kwlist, &obj, &stream_arg))
        return NULL;
    if (PyArray_Check(obj)) {
        PyErr_SetString(PyExc_TypeError,
                        "asgpumat views device memory; upload a numpy array with "
                        "fastmog.GpuMat.from_array(a, stream=s)");
        return NULL;
    }
    fm_Stream *stream = fm_require_stream(st, stream_arg, -1);
    if (stream == NULL)
        return NULL;
    if (Py_IS_TYPE(obj, st->GpuMat_type)) {  /* already one: itself */
        fm_GpuMat *given = fm_gpumat_check_open(st, obj, "obj");
        return given != NULL && fm_check_same_device(given, stream->device, "obj") == 0
                   ? Py_NewRef(obj) : NULL;
    }
    /* Held: the producer's code may release the GIL (stream.c's rule). */
    if (fm_stream_hold(stream) < 0)
        return NULL;
    fm_GpuMat *m = NULL;
    if (fm_device_enter(st, stream->device, &guard) == 0) {
        m = fm_as_device_image(st, obj, "obj", &fm_gpumat_rule, stream, NULL, NULL);
        if (m != NULL && fm_device_buffer_use(st, m->buffer, stream, FM_USE_RELEASE_AFTER) < 0)
            Py_CLEAR(m);
        fm_device_exit(&guard);
    }
    fm_stream_unhold(stream);
    return (PyObject *)m;
}

PyMethodDef fm_transfer_methods[] = {
    {"asgpumat", (PyCFunction)(void (*)(void))asgpumat, METH_VARARGS | METH_KEYWORDS,
     FM_DOC_ASGPUMAT},
    {NULL, NULL, 0, NULL},
};
