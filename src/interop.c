/* Zero-copy interop with CuPy, PyTorch and others: the CUDA Array Interface
 * (v3) and DLPack, both ways. */
#include "fastmog.h"
#include "dlpack.h"

/* ---- export ------------------------------------------------------------- */

/* CAI/DLPack stream integers: 1 is the legacy default stream, 2 the
 * per-thread default stream, anything else a cudaStream_t. */
static uintptr_t stream_to_protocol_int(cudaStream_t s)
{
    if (s == cudaStreamLegacy || s == NULL)
        return 1;
    if (s == cudaStreamPerThread)
        return 2;
    return (uintptr_t)s;
}

static cudaStream_t protocol_int_to_stream(uintptr_t v)
{
    if (v == 1)
        return cudaStreamLegacy;
    if (v == 2)
        return cudaStreamPerThread;
    return (cudaStream_t)v;
}

static PyObject *typestr_of(int type_num)
{
    PyArray_Descr *descr = PyArray_DescrFromType(type_num);
    if (descr == NULL)
        return NULL;
    int size = (int)PyDataType_ELSIZE(descr);
    PyObject *s = PyUnicode_FromFormat("%c%c%d", size == 1 ? '|' : '<', descr->kind, size);
    Py_DECREF(descr);
    return s;
}

PyObject *fm_gpumat_cuda_array_interface(fm_GpuMat *self, void *Py_UNUSED(closure))
{
    fm_GpuMat *m = fm_gpumat_check_open(fm_state_of((PyObject *)self), (PyObject *)self, "self");
    if (m == NULL)
        return NULL;
    PyObject *shape = NULL, *strides = NULL, *typestr = NULL, *descr = NULL;
    PyObject *stream = NULL, *result = NULL;

    shape = PyObject_GetAttrString((PyObject *)m, "shape");
    typestr = typestr_of(m->type_num);
    if (shape == NULL || typestr == NULL)
        goto done;
    descr = Py_BuildValue("[(sO)]", "", typestr);
    if (descr == NULL)
        goto done;
    if (m->height == 1 || m->pitch == fm_gpumat_row_bytes(m))
        strides = Py_NewRef(Py_None);
    else if (m->ndim == 3)
        strides = Py_BuildValue("(nnn)", (Py_ssize_t)m->pitch,
                                (Py_ssize_t)(m->channels * m->elem_size), (Py_ssize_t)m->elem_size);
    else
        strides = Py_BuildValue("(nn)", (Py_ssize_t)m->pitch, (Py_ssize_t)m->elem_size);
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
                           m->readonly ? Py_True : Py_False,
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
} export_ctx;

static void export_ctx_free(export_ctx *ctx)
{
    if (Py_IsInitialized()) {
        PyGILState_STATE gil = PyGILState_Ensure();
        Py_XDECREF(ctx->buffer);
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

static int dl_dtype_of(int type_num, fm_dl_dtype *out)
{
    PyArray_Descr *descr = PyArray_DescrFromType(type_num);
    if (descr == NULL)
        return -1;
    out->bits = (uint8_t)(8 * PyDataType_ELSIZE(descr));
    out->lanes = 1;
    out->code = descr->kind == 'f' ? FM_DL_FLOAT : descr->kind == 'u' ? FM_DL_UINT : FM_DL_INT;
    Py_DECREF(descr);
    return 0;
}

PyObject *fm_gpumat_dlpack(fm_GpuMat *self, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"stream", "max_version", "dl_device", "copy", NULL};
    PyObject *stream_arg = Py_None, *max_version = Py_None, *dl_device = Py_None;
    PyObject *copy = Py_None;
    fm_state *st = fm_state_of((PyObject *)self);

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$OOOO:__dlpack__", kwlist,
                                     &stream_arg, &max_version, &dl_device, &copy))
        return NULL;
    fm_GpuMat *m = fm_gpumat_check_open(st, (PyObject *)self, "self");
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
    if (m->pitch % (size_t)m->elem_size != 0) {
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
    if (consumer != -1) {
        cudaStream_t s = stream_arg == Py_None ? cudaStreamLegacy
                                               : protocol_int_to_stream((uintptr_t)consumer);
        if (fm_device_buffer_order_before(st, m->buffer, s) < 0)
            return NULL;
    }

    export_ctx *ctx = PyMem_RawCalloc(1, sizeof *ctx);
    if (ctx == NULL)
        return PyErr_NoMemory();
    ctx->buffer = Py_NewRef(m->buffer);
    fm_dl_tensor t;
    memset(&t, 0, sizeof t);
    t.data = m->data;
    t.device.device_type = FM_DL_CUDA;
    t.device.device_id = m->device;
    t.ndim = m->ndim;
    if (dl_dtype_of(m->type_num, &t.dtype) < 0) {
        export_ctx_free(ctx);
        return NULL;
    }
    ctx->shape[0] = m->height;
    ctx->shape[1] = m->width;
    ctx->shape[2] = m->channels;
    ctx->strides[0] = (int64_t)(m->pitch / (size_t)m->elem_size);
    ctx->strides[1] = m->ndim == 3 ? m->channels : 1;
    ctx->strides[2] = 1;
    t.shape = ctx->shape;
    t.strides = ctx->strides;

    PyObject *capsule;
    if (versioned) {
        ctx->versioned.version_major = FM_DLPACK_MAJOR;
        ctx->versioned.version_minor = FM_DLPACK_MINOR;
        ctx->versioned.manager_ctx = ctx;
        ctx->versioned.deleter = versioned_deleter;
        ctx->versioned.flags = m->readonly ? FM_DLPACK_FLAG_READ_ONLY : 0;
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

PyObject *fm_gpumat_dlpack_device(fm_GpuMat *self, PyObject *Py_UNUSED(noargs))
{
    return Py_BuildValue("(ii)", FM_DL_CUDA, self->device);
}

/* ---- import ------------------------------------------------------------- */

/* Geometry of a foreign 2-D or 3-D array, strides in bytes. */
typedef struct foreign_view {
    char *data;
    int ndim;
    int64_t shape[3];
    int64_t strides[3];     /* bytes; filled for compact arrays too */
    int type_num;
    int readonly;
} foreign_view;

static int check_foreign_view(foreign_view *v)
{
    if (v->ndim != 2 && v->ndim != 3) {
        PyErr_Format(PyExc_ValueError, "the array must be H x W or H x W x C, got %d dimensions",
                     v->ndim);
        return -1;
    }
    int elem = fm_supported_elem_size(v->type_num);
    if (elem == 0) {
        PyErr_SetString(PyExc_TypeError, "the array's dtype is not supported by GpuMat");
        return -1;
    }
    int64_t channels = v->ndim == 3 ? v->shape[2] : 1;
    if (v->shape[0] < 1 || v->shape[1] < 1 || (channels != 1 && channels != 3 && channels != 4)) {
        PyErr_SetString(PyExc_ValueError,
                        "the array must have positive height and width and 1, 3 or 4 channels");
        return -1;
    }
    int pixels_ok = (v->ndim == 2 || v->strides[2] == elem || channels == 1)
                    && (v->strides[1] == channels * elem || v->shape[1] == 1);
    int64_t row_bytes = v->shape[1] * channels * elem;
    if (!pixels_ok || (v->shape[0] > 1 && v->strides[0] < row_bytes)) {
        PyErr_SetString(PyExc_ValueError,
                        "the array must have contiguous pixels within each row and rows in order");
        return -1;
    }
    if (v->shape[0] > INT32_MAX || row_bytes > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "the array is too large for a GpuMat");
        return -1;
    }
    if (v->shape[0] == 1)
        v->strides[0] = row_bytes;
    return 0;
}

static void compact_strides(foreign_view *v)
{
    int64_t s = fm_supported_elem_size(v->type_num);
    for (int i = v->ndim - 1; i >= 0; i--) {
        v->strides[i] = s;
        s *= v->shape[i];
    }
}

static fm_GpuMat *view_from_foreign(fm_state *st, foreign_view *v, PyObject *owner)
{
    struct cudaPointerAttributes attr;
    cudaError_t err = cudaPointerGetAttributes(&attr, v->data);
    if (err != cudaSuccess)
        return (fm_GpuMat *)fm_cuda_error(st, err, "finding the device of a foreign array");
    if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged) {
        PyErr_SetString(PyExc_ValueError, "the array is not in device memory");
        return NULL;
    }
    int channels = v->ndim == 3 ? (int)v->shape[2] : 1;
    size_t size = (size_t)v->strides[0] * (size_t)(v->shape[0] - 1)
                  + (size_t)v->shape[1] * (size_t)channels * (size_t)fm_supported_elem_size(v->type_num);
    fm_DeviceBuffer *buffer = fm_device_buffer_wrap(st, attr.device, v->data, size, owner);
    if (buffer == NULL)
        return NULL;
    fm_GpuMat *m = fm_gpumat_view(st, buffer, v->data, (size_t)v->strides[0], (int)v->shape[0],
                                  (int)v->shape[1], channels, v->ndim, v->type_num, v->readonly);
    Py_DECREF(buffer);
    return m;
}

static int int64_tuple(PyObject *obj, int64_t *out, int n, const char *what)
{
    if (!PyTuple_Check(obj) || PyTuple_GET_SIZE(obj) != n) {
        PyErr_Format(PyExc_ValueError, "__cuda_array_interface__ %s must be a tuple of %d ints",
                     what, n);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        out[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(obj, i));
        if (out[i] == -1 && PyErr_Occurred())
            return -1;
    }
    return 0;
}

/* Orders `consumer` after the producer's stream with an event (GPU-side). */
static int wait_for_producer(fm_state *st, cudaStream_t producer, fm_Stream *consumer)
{
    cudaEvent_t fence;
    if (producer == consumer->handle)
        return 0;
    if (fm_fence_acquire(st, consumer->device, &fence) < 0)
        return -1;
    cudaError_t err = cudaEventRecord(fence, producer);
    if (err == cudaSuccess)
        err = cudaStreamWaitEvent(consumer->handle, fence, 0);
    fm_fence_release(st, consumer->device, fence);
    if (err != cudaSuccess)
        return fm_cuda_fail(st, err, "ordering a stream after a foreign array's producer");
    return 0;
}

static fm_GpuMat *from_cuda_array_interface(fm_state *st, PyObject *obj, PyObject *cai,
                                            fm_Stream *stream)
{
    foreign_view v;
    PyArray_Descr *descr = NULL;
    memset(&v, 0, sizeof v);
    if (!PyDict_Check(cai)) {
        PyErr_SetString(PyExc_TypeError, "__cuda_array_interface__ must be a dict");
        return NULL;
    }
    PyObject *shape = PyDict_GetItemString(cai, "shape");
    PyObject *typestr = PyDict_GetItemString(cai, "typestr");
    PyObject *data = PyDict_GetItemString(cai, "data");
    PyObject *strides = PyDict_GetItemString(cai, "strides");
    PyObject *producer = PyDict_GetItemString(cai, "stream");
    if (shape == NULL || typestr == NULL || data == NULL || !PyTuple_Check(data)
        || PyTuple_GET_SIZE(data) != 2) {
        PyErr_SetString(PyExc_ValueError, "__cuda_array_interface__ lacks shape, typestr or data");
        return NULL;
    }
    if (!PyTuple_Check(shape)) {
        PyErr_SetString(PyExc_ValueError, "__cuda_array_interface__ shape must be a tuple");
        return NULL;
    }
    v.ndim = (int)PyTuple_GET_SIZE(shape);
    if (v.ndim != 2 && v.ndim != 3) {
        (void)check_foreign_view(&v);  /* raises the shape error */
        return NULL;
    }
    if (int64_tuple(shape, v.shape, v.ndim, "shape") < 0)
        return NULL;
    if (!PyArray_DescrConverter(typestr, &descr))
        return NULL;
    v.type_num = PyDataType_ISNOTSWAPPED(descr) ? descr->type_num : -1;
    if (v.type_num >= 0 && PyDataType_ISINTEGER(descr)) {
        /* canonical numbers, as GpuMat uses */
        int is_signed = PyDataType_ISSIGNED(descr);
        int size = (int)PyDataType_ELSIZE(descr);
        v.type_num = size == 1 ? (is_signed ? NPY_INT8 : NPY_UINT8)
                   : size == 2 ? (is_signed ? NPY_INT16 : NPY_UINT16)
                   : size == 4 ? (is_signed ? NPY_INT32 : NPY_UINT32) : -1;
    }
    Py_DECREF(descr);
    unsigned long long ptr = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(data, 0));
    if (ptr == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    v.data = (char *)(uintptr_t)ptr;
    v.readonly = PyObject_IsTrue(PyTuple_GET_ITEM(data, 1));
    if (strides == NULL || strides == Py_None)
        compact_strides(&v);
    else if (int64_tuple(strides, v.strides, v.ndim, "strides") < 0)
        return NULL;
    if (check_foreign_view(&v) < 0)
        return NULL;
    if (producer != NULL && producer != Py_None) {
        unsigned long long p = PyLong_AsUnsignedLongLong(producer);
        if (p == (unsigned long long)-1 && PyErr_Occurred())
            return NULL;
        if (wait_for_producer(st, protocol_int_to_stream((uintptr_t)p), stream) < 0)
            return NULL;
    }
    return view_from_foreign(st, &v, obj);
}

/* Owns a consumed DLPack tensor: the capsule destructor calls its deleter. */
static void imported_legacy_destructor(PyObject *capsule)
{
    fm_dl_managed *t = PyCapsule_GetPointer(capsule, "fastmog.dlpack_import");
    if (t != NULL && t->deleter != NULL)
        t->deleter(t);
}

static void imported_versioned_destructor(PyObject *capsule)
{
    fm_dl_managed_versioned *t = PyCapsule_GetPointer(capsule, "fastmog.dlpack_import_v1");
    if (t != NULL && t->deleter != NULL)
        t->deleter(t);
}

static int type_num_of_dl(fm_dl_dtype d)
{
    if (d.lanes != 1)
        return -1;
    switch (d.code) {
    case FM_DL_UINT:
        return d.bits == 8 ? NPY_UINT8 : d.bits == 16 ? NPY_UINT16 : d.bits == 32 ? NPY_UINT32 : -1;
    case FM_DL_INT:
        return d.bits == 8 ? NPY_INT8 : d.bits == 16 ? NPY_INT16 : d.bits == 32 ? NPY_INT32 : -1;
    case FM_DL_FLOAT:
        return d.bits == 32 ? NPY_FLOAT32 : d.bits == 64 ? NPY_FLOAT64 : -1;
    default:
        return -1;
    }
}

static fm_GpuMat *from_dlpack(fm_state *st, PyObject *obj, fm_Stream *stream)
{
    PyObject *capsule = NULL, *owner = NULL;
    fm_GpuMat *result = NULL;
    unsigned long long s = (unsigned long long)stream_to_protocol_int(stream->handle);

    {
        /* Ask for a versioned capsule first; older producers refuse the keyword. */
        PyObject *kw = Py_BuildValue("{s:K,s:(ii)}", "stream", s, "max_version",
                                     FM_DLPACK_MAJOR, FM_DLPACK_MINOR);
        PyObject *method = PyObject_GetAttrString(obj, "__dlpack__");
        PyObject *empty = PyTuple_New(0);
        capsule = NULL;
        if (kw && method && empty) {
            capsule = PyObject_Call(method, empty, kw);
            if (capsule == NULL && PyErr_ExceptionMatches(PyExc_TypeError)) {
                PyErr_Clear();
                PyDict_DelItemString(kw, "max_version");
                capsule = PyObject_Call(method, empty, kw);
            }
        }
        Py_XDECREF(kw);
        Py_XDECREF(method);
        Py_XDECREF(empty);
    }
    if (capsule == NULL)
        return NULL;

    foreign_view v;
    memset(&v, 0, sizeof v);
    fm_dl_tensor *t;
    if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
        fm_dl_managed_versioned *mt = PyCapsule_GetPointer(capsule, "dltensor_versioned");
        if (mt->version_major > FM_DLPACK_MAJOR) {
            PyErr_SetString(PyExc_BufferError, "the producer's DLPack version is too new");
            goto error;
        }
        t = &mt->dl_tensor;
        v.readonly = (mt->flags & FM_DLPACK_FLAG_READ_ONLY) != 0;
        if (PyCapsule_SetName(capsule, "used_dltensor_versioned") < 0)
            goto error;
        owner = PyCapsule_New(mt, "fastmog.dlpack_import_v1", imported_versioned_destructor);
    }
    else if (PyCapsule_IsValid(capsule, "dltensor")) {
        fm_dl_managed *mt = PyCapsule_GetPointer(capsule, "dltensor");
        t = &mt->dl_tensor;
        if (PyCapsule_SetName(capsule, "used_dltensor") < 0)
            goto error;
        owner = PyCapsule_New(mt, "fastmog.dlpack_import", imported_legacy_destructor);
    }
    else {
        PyErr_SetString(PyExc_TypeError, "__dlpack__ did not return a DLPack capsule");
        goto error;
    }
    if (owner == NULL)
        goto error;
    if (t->device.device_type != FM_DL_CUDA && t->device.device_type != FM_DL_CUDA_MANAGED) {
        PyErr_SetString(PyExc_ValueError, "the array is not in CUDA device memory");
        goto error;
    }
    v.ndim = t->ndim;
    v.type_num = type_num_of_dl(t->dtype);
    v.data = (char *)t->data + t->byte_offset;
    if (v.ndim == 2 || v.ndim == 3) {
        int elem = fm_supported_elem_size(v.type_num);
        for (int i = 0; i < v.ndim; i++)
            v.shape[i] = t->shape[i];
        if (t->strides == NULL)
            compact_strides(&v);
        else
            for (int i = 0; i < v.ndim; i++)
                v.strides[i] = t->strides[i] * elem;
    }
    if (check_foreign_view(&v) < 0)
        goto error;
    result = view_from_foreign(st, &v, owner);
error:
    Py_XDECREF(owner);
    Py_DECREF(capsule);
    return result;
}

fm_GpuMat *fm_as_gpumat(fm_state *st, PyObject *obj, fm_Stream *stream)
{
    fm_GpuMat *result = NULL;
    fm_device_guard guard;

    if (Py_IS_TYPE(obj, st->GpuMat_type)) {
        fm_GpuMat *m = fm_gpumat_check_open(st, obj, "obj");
        if (m == NULL || fm_require_stream(st, (PyObject *)stream, m->device) == NULL)
            return NULL;
        return (fm_GpuMat *)Py_NewRef(obj);
    }
    if (PyArray_Check(obj)) {
        PyErr_SetString(PyExc_TypeError,
                        "asgpumat views device memory; upload a numpy array with "
                        "fastmog.GpuMat.from_array(a, stream=s)");
        return NULL;
    }
    if (fm_device_enter(st, stream->device, &guard) < 0)
        return NULL;
    if (PyObject_HasAttrString(obj, "__cuda_array_interface__")) {
        PyObject *cai = PyObject_GetAttrString(obj, "__cuda_array_interface__");
        if (cai != NULL)
            result = from_cuda_array_interface(st, obj, cai, stream);
        Py_XDECREF(cai);
    }
    else if (PyObject_HasAttrString(obj, "__dlpack__")) {
        result = from_dlpack(st, obj, stream);
    }
    else {
        PyErr_Format(PyExc_TypeError,
                     "cannot view %.200s as a GpuMat: it has neither __cuda_array_interface__ "
                     "nor __dlpack__", Py_TYPE(obj)->tp_name);
    }
    if (result != NULL && result->device != stream->device) {
        PyErr_Format(PyExc_ValueError, "the array is on device %d but the stream is on device %d",
                     result->device, stream->device);
        Py_CLEAR(result);
    }
    if (result != NULL && fm_device_buffer_use(st, result->buffer, stream) < 0)
        Py_CLEAR(result);
    fm_device_exit(&guard);
    return result;
}

PyObject *fm_asgpumat(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"", "stream", NULL};
    fm_state *st = fm_state_of_module(module);
    PyObject *obj, *stream_arg = NULL;

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
    return (PyObject *)fm_as_gpumat(st, obj, stream);
}
