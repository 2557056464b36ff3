/* The front door: whatever the user passed becomes a device image here, checked
 * once, before anything is queued; and the copies between host and device. */
#include "fastmog.h"
#include "docstrings.h"

/* ---- copies ----------------------------------------------------------------- */

int fm_upload(fm_state *st, fm_GpuMat *dst, const fm_host_image *src, fm_Stream *stream,
              enum fm_use how, fm_call *call)
{
    size_t row_bytes = fm_image_row_bytes(&dst->shape);
    const char *from = src->data;
    size_t from_pitch = src->pitch;
    PyObject *keep = Py_NewRef(src->array);
    /* Held through the copy: staging releases the GIL, and another thread may
     * close `dst` meanwhile; the memory must outlive the queued copy. */
    fm_DeviceBuffer *buffer = (fm_DeviceBuffer *)Py_NewRef(dst->buffer);
    int rc = -1;

    if (fm_device_buffer_use(st, buffer, stream, how) < 0)
        goto done;
    if (!fm_host_image_pinned(src)) {
        /* A pageable source would make the runtime wait for the stream
         * first; a pinned copy keeps the upload asynchronous. */
        fm_PinnedBuffer *staging = fm_pinned_buffer_new(st, row_bytes * (size_t)dst->shape.height);
        if (staging == NULL)
            goto done;
        fm_host_image_pack(src, staging->ptr);
        Py_SETREF(keep, (PyObject *)staging);
        from = staging->ptr;
        from_pitch = row_bytes;
    }
    if (fm_call_gpu_begin(st, call) < 0)
        goto done;
    cudaError_t err = cudaMemcpy2DAsync(dst->data, dst->pitch, from, from_pitch, row_bytes,
                                        (size_t)dst->shape.height, cudaMemcpyHostToDevice,
                                        stream->handle);
    if (err != cudaSuccess) {
        fm_cuda_fail(st, err, "uploading a %dx%dx%d image", dst->shape.height, dst->shape.width,
                     dst->shape.channels);
        goto done;
    }
    if (fm_call_gpu_end(st, call) < 0)
        goto done;
    fm_call_bytes(call, (int64_t)(row_bytes * dst->shape.height), (int64_t)(row_bytes * dst->shape.height));
    rc = fm_keepalive_add(st, stream, keep);
done:
    Py_DECREF(buffer);
    Py_DECREF(keep);
    return rc;
}

PyObject *fm_download(fm_state *st, fm_GpuMat *src, const fm_host_image *dst, int blocking,
                      fm_Stream *stream, fm_call *call)
{
    const fm_image_shape *s = &src->shape;
    size_t row_bytes = fm_image_row_bytes(s), pitch = row_bytes;
    PyObject *result;
    int pinned = 1;
    cudaError_t err;
    /* Held through the copy: allocating and waiting release the GIL, and
     * another thread may close `src` meanwhile. */
    fm_DeviceBuffer *buffer = (fm_DeviceBuffer *)Py_NewRef(src->buffer);

    if (dst == NULL) {
        if ((result = fm_host_image_new_pinned(st, s)) == NULL) {
            Py_DECREF(buffer);
            return NULL;
        }
    }
    else {
        pinned = fm_host_image_pinned(dst);
        if (!pinned && !blocking) {
            PyErr_SetString(PyExc_ValueError,
                            "a non-blocking download needs a pinned destination: "
                            "use fastmog.pinned_like(...) or download(stream=s) with out=None");
            Py_DECREF(buffer);
            return NULL;
        }
        result = Py_NewRef(dst->array);
        pitch = dst->pitch;
    }
    char *to = PyArray_BYTES((PyArrayObject *)result);
    if (fm_device_buffer_use(st, buffer, stream, FM_USE_RELEASE_AFTER) < 0)
        goto error;
    if (!pinned) {
        /* Wait first, interruptibly; the pageable copy then runs at once. */
        fm_call_wait_begin(st, call);
        int rc = fm_wait_stream(st, stream, "waiting for a stream before a download");
        fm_call_wait_end(st, call);
        if (rc < 0 || fm_call_gpu_begin(st, call) < 0)
            goto error;
        Py_BEGIN_ALLOW_THREADS
        err = cudaMemcpy2DAsync(to, pitch, src->data, src->pitch, row_bytes, (size_t)s->height,
                                cudaMemcpyDeviceToHost, stream->handle);
        Py_END_ALLOW_THREADS
        if (err == cudaSuccess && fm_call_gpu_end(st, call) < 0)
            goto error;
        if (err == cudaSuccess) {
            Py_BEGIN_ALLOW_THREADS
            err = cudaStreamSynchronize(stream->handle);
            Py_END_ALLOW_THREADS
        }
    }
    else {
        if (fm_call_gpu_begin(st, call) < 0)
            goto error;
        err = cudaMemcpy2DAsync(to, pitch, src->data, src->pitch, row_bytes, (size_t)s->height,
                                cudaMemcpyDeviceToHost, stream->handle);
        if (err == cudaSuccess
            && (fm_call_gpu_end(st, call) < 0
                /* The destination must outlive the copy even if the caller
                 * drops it or a blocking wait is interrupted. */
                || fm_keepalive_add(st, stream, result) < 0))
            goto error;
    }
    fm_call_bytes(call, (int64_t)(row_bytes * s->height), (int64_t)(row_bytes * s->height));
    if (err != cudaSuccess) {
        fm_cuda_error(st, err, "downloading a %dx%dx%d image", s->height, s->width, s->channels);
        goto error;
    }
    if (pinned && blocking) {
        fm_call_wait_begin(st, call);
        int rc = fm_wait_stream(st, stream, "waiting for a download");
        fm_call_wait_end(st, call);
        if (rc < 0)
            goto error;
        fm_keepalive_sweep(st);
    }
    Py_DECREF(buffer);
    return result;

error:
    Py_DECREF(buffer);
    Py_DECREF(result);
    return NULL;
}

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
    int rc = fm_call_gpu_queue(st, &call) < 0 ? -1 : fm_upload(st, m, src, stream, FM_USE_AFTER_EARLIER, &call);
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
    if (fm_device_enter(st, stream->device, &guard) < 0)
        return NULL;
    fm_GpuMat *m = fm_as_device_image(st, obj, "obj", &fm_gpumat_rule, stream, NULL, NULL);
    if (m != NULL && fm_device_buffer_use(st, m->buffer, stream, FM_USE_RELEASE_AFTER) < 0)
        Py_CLEAR(m);
    fm_device_exit(&guard);
    return (PyObject *)m;
}

PyMethodDef fm_transfer_methods[] = {
    {"asgpumat", (PyCFunction)(void (*)(void))asgpumat, METH_VARARGS | METH_KEYWORDS,
     FM_DOC_ASGPUMAT},
    {NULL, NULL, 0, NULL},
};
