/* GpuMat's memory handed to other libraries without copies: the CUDA Array
 * Interface (v3) and DLPack (legacy and versioned capsules). */
#include "interop.h"

static PyObject *typestr_of(int type_num)
{
    const fm_dtype *d = fm_dtype_of(type_num);
    return PyUnicode_FromFormat("%c%c%d", d->itemsize == 1 ? '|' : '<', d->kind, d->itemsize);
}

PyObject *fm_gpumat_cuda_array_interface(PyObject *self, void *Py_UNUSED(closure))
{
    fm_GpuMat *m = fm_gpumat_check_open(fm_state_of(self), self, "self");
    if (m == NULL)
        return NULL;
    if (m->shape.readonly) {
        /* Consumers ignore the interface's read-only flag (CuPy writes), so a
         * read-only view has no interface at all: AttributeError makes
         * hasattr() false and consumers go on to versioned DLPack. */
        PyErr_SetString(PyExc_AttributeError,
                        "a read-only GpuMat has no __cuda_array_interface__ (consumers ignore "
                        "its read-only flag): use __dlpack__(max_version=(1, 0)) or download()");
        return NULL;
    }
    PyObject *shape = NULL, *strides = NULL, *typestr = NULL, *descr = NULL;
    PyObject *stream = NULL, *result = NULL;

    shape = PyObject_GetAttrString((PyObject *)m, "shape");
    typestr = typestr_of(m->shape.type_num);
    if (shape == NULL || typestr == NULL)
        goto done;
    descr = Py_BuildValue("[(sO)]", "", typestr);
    if (descr == NULL)
        goto done;
    Py_ssize_t elem = fm_dtype_size(m->shape.type_num);
    if (m->shape.height == 1 || m->pitch == fm_image_row_bytes(&m->shape))
        strides = Py_NewRef(Py_None);
    else if (m->shape.ndim == 3)
        strides = Py_BuildValue("(nnn)", (Py_ssize_t)m->pitch, m->shape.channels * elem, elem);
    else
        strides = Py_BuildValue("(nn)", (Py_ssize_t)m->pitch, elem);
    /* The consumer orders itself after the stream of our latest queued use. */
    fm_Stream *last = m->buffer->last_stream;
    if (last != NULL && !last->closed)
        stream = PyLong_FromSize_t(stream_to_protocol_int(last->handle));
    else
        stream = Py_NewRef(Py_None);
    if (strides == NULL || stream == NULL)
        goto done;
    result = Py_BuildValue("{s:O,s:O,s:O,s:(KO),s:i,s:O,s:O}",
                           "shape", shape, "typestr", typestr, "descr", descr,
                           "data", (unsigned long long)(uintptr_t)m->data,
                           m->shape.readonly ? Py_True : Py_False,
                           "version", 3, "strides", strides, "stream", stream);
    if (result != NULL)
        m->cai_exported = 1;
done:
    Py_XDECREF(shape);
    Py_XDECREF(strides);
    Py_XDECREF(typestr);
    Py_XDECREF(descr);
    Py_XDECREF(stream);
    return result;
}

/* What a DLPack export owns: the managed tensor, its shape and strides, and
 * a reference to the device buffer. Allocated with the raw allocator because
 * the deleter may run on a thread that does not hold the GIL. */
typedef struct export_ctx {
    fm_dl_managed legacy;
    fm_dl_managed_versioned versioned;
    int64_t shape[3];
    int64_t strides[3];
    PyObject *buffer;   /* strong reference */
    int has_consumer;
    cudaStream_t consumer;  /* the stream the consumer asked for */
} export_ctx;

/* Runs when the consumer lets go of the tensor, its kernels on the stream it
 * named possibly still queued: the memory is released only after them. */
static void export_ctx_free(export_ctx *ctx)
{
    if (Py_IsInitialized()) {
        PyGILState_STATE gil = PyGILState_Ensure();
        fm_saved_error saved = fm_error_save();
        if (ctx->buffer != NULL && ctx->has_consumer) {
            fm_DeviceBuffer *buf = (fm_DeviceBuffer *)ctx->buffer;
            if (fm_device_buffer_consumer_done(fm_state_of(ctx->buffer), buf, ctx->consumer) < 0)
                PyErr_WriteUnraisable(ctx->buffer);
        }
        Py_XDECREF(ctx->buffer);
        fm_error_restore(saved);
        PyGILState_Release(gil);
    }
    PyMem_RawFree(ctx);
}

static void legacy_deleter(fm_dl_managed *self)
{
    export_ctx_free((export_ctx *)self->manager_ctx);
}

static void versioned_deleter(fm_dl_managed_versioned *self)
{
    export_ctx_free((export_ctx *)self->manager_ctx);
}

/* An unconsumed capsule still owns the tensor. */
static void legacy_capsule_destructor(PyObject *capsule)
{
    if (PyCapsule_IsValid(capsule, "dltensor")) {
        fm_dl_managed *t = PyCapsule_GetPointer(capsule, "dltensor");
        t->deleter(t);
    }
}

static void versioned_capsule_destructor(PyObject *capsule)
{
    if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
        fm_dl_managed_versioned *t = PyCapsule_GetPointer(capsule, "dltensor_versioned");
        t->deleter(t);
    }
}

PyObject *fm_gpumat_dlpack(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"stream", "max_version", "dl_device", "copy", NULL};
    PyObject *stream_arg = Py_None, *max_version = Py_None, *dl_device = Py_None;
    PyObject *copy = Py_None;
    fm_state *st = fm_state_of(self);

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$OOOO:__dlpack__", kwlist,
                                     &stream_arg, &max_version, &dl_device, &copy))
        return NULL;
    fm_GpuMat *m = fm_gpumat_check_open(st, self, "self");
    if (m == NULL)
        return NULL;
    if (copy == Py_True) {
        PyErr_SetString(PyExc_BufferError, "GpuMat.__dlpack__ exports without copying");
        return NULL;
    }
    if (dl_device != Py_None) {
        int type, id;
        if (!PyArg_ParseTuple(dl_device, "ii", &type, &id))
            return NULL;
        if (type != FM_DL_CUDA || id != m->device) {
            PyErr_SetString(PyExc_BufferError, "GpuMat can only be exported to its own device");
            return NULL;
        }
    }
    const fm_dtype *dtype = fm_dtype_of(m->shape.type_num);
    if (m->pitch % (size_t)dtype->itemsize != 0) {
        PyErr_SetString(PyExc_BufferError, "row pitch is not a whole number of elements");
        return NULL;
    }
    int versioned = 0;
    if (max_version != Py_None) {
        long major;
        if (!PyTuple_Check(max_version) || PyTuple_GET_SIZE(max_version) < 1
            || ((major = PyLong_AsLong(PyTuple_GET_ITEM(max_version, 0))) == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            PyErr_SetString(PyExc_TypeError, "max_version must be a (major, minor) tuple");
            return NULL;
        }
        versioned = major >= FM_DLPACK_MAJOR;
    }
    if (m->shape.readonly && !versioned) {
        /* The legacy capsule has no read-only flag: the consumer would write. */
        PyErr_SetString(PyExc_BufferError,
                        "a read-only GpuMat needs a consumer of DLPack 1.0 or later "
                        "(__dlpack__(max_version=(1, 0)))");
        return NULL;
    }
    /* Order the consumer's stream after our queued work (-1: it asks for none). */
    long long consumer = -2;
    if (stream_arg != Py_None) {
        consumer = PyLong_AsLongLong(stream_arg);
        if (consumer == -1 && PyErr_Occurred())
            return NULL;
        if (consumer == 0 || consumer < -1) {
            PyErr_SetString(PyExc_ValueError, "stream=0 is ambiguous for CUDA; use 1 or 2");
            return NULL;
        }
    }
    cudaStream_t consumer_stream = stream_arg == Py_None
                                       ? cudaStreamLegacy
                                       : protocol_int_to_stream((uintptr_t)consumer);
    if (consumer != -1 && fm_device_buffer_order_before(st, m->buffer, consumer_stream) < 0)
        return NULL;

    export_ctx *ctx = PyMem_RawCalloc(1, sizeof *ctx);
    if (ctx == NULL)
        return PyErr_NoMemory();
    ctx->buffer = Py_NewRef(m->buffer);
    ctx->has_consumer = consumer != -1;
    ctx->consumer = consumer_stream;
    fm_dl_tensor t;
    memset(&t, 0, sizeof t);
    t.data = m->data;
    t.device.device_type = FM_DL_CUDA;
    t.device.device_id = m->device;
    t.ndim = m->shape.ndim;
    t.dtype.code = dtype->dl_code;
    t.dtype.bits = (uint8_t)(8 * dtype->itemsize);
    t.dtype.lanes = 1;
    ctx->shape[0] = m->shape.height;
    ctx->shape[1] = m->shape.width;
    ctx->shape[2] = m->shape.channels;
    ctx->strides[0] = (int64_t)(m->pitch / (size_t)dtype->itemsize);
    ctx->strides[1] = m->shape.ndim == 3 ? m->shape.channels : 1;
    ctx->strides[2] = 1;
    t.shape = ctx->shape;
    t.strides = ctx->strides;

    PyObject *capsule;
    if (versioned) {
        ctx->versioned.version_major = FM_DLPACK_MAJOR;
        ctx->versioned.version_minor = FM_DLPACK_MINOR;
        ctx->versioned.manager_ctx = ctx;
        ctx->versioned.deleter = versioned_deleter;
        ctx->versioned.flags = m->shape.readonly ? FM_DLPACK_FLAG_READ_ONLY : 0;
        ctx->versioned.dl_tensor = t;
        capsule = PyCapsule_New(&ctx->versioned, "dltensor_versioned", versioned_capsule_destructor);
    }
    else {
        ctx->legacy.dl_tensor = t;
        ctx->legacy.manager_ctx = ctx;
        ctx->legacy.deleter = legacy_deleter;
        capsule = PyCapsule_New(&ctx->legacy, "dltensor", legacy_capsule_destructor);
    }
    if (capsule == NULL)
        export_ctx_free(ctx);
    return capsule;
}

PyObject *fm_gpumat_dlpack_device(PyObject *self, PyObject *Py_UNUSED(noargs))
{
    return Py_BuildValue("(ii)", FM_DL_CUDA, ((fm_GpuMat *)self)->device);
}
