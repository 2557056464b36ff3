/* The copies between host and device under GpuMat: upload and download, each
 * queued on a stream, keeping alive what the copy still reads or writes. */
#include "fastmog.h"

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
    fm_call_gpu_submitted(call);
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
        fm_call_gpu_submitted(call);
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
            call->drained = err == cudaSuccess;
        }
    }
    else {
        if (fm_call_gpu_begin(st, call) < 0)
            goto error;
        fm_call_gpu_submitted(call);
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
        const uint64_t mark = fm_keepalive_mark(st);
        fm_call_wait_begin(st, call);
        int rc = fm_wait_stream(st, stream, "waiting for a download");
        fm_call_wait_end(st, call);
        if (rc < 0)
            goto error;
        call->drained = 1;
        fm_keepalive_sweep_after_wait(st, stream, mark);
    }
    Py_DECREF(buffer);
    return result;

error:
    Py_DECREF(buffer);
    Py_DECREF(result);
    return NULL;
}
