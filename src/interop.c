/* Other libraries' device memory, both ways and without copies: the CUDA Array
 * Interface (v2, v3) and DLPack; what fastmog does with each producer's
 * `stream` is written at stream_from_protocol(). */
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

/* ---- import ------------------------------------------------------------- */

/* Geometry of a producer's 2-D or 3-D array, strides in bytes. */
typedef struct foreign_view {
    char *data;
    int ndim;
    int64_t shape[3];
    int64_t strides[3];     /* bytes; filled for compact arrays too */
    int have_strides;
    int type_num;
    int readonly;
} foreign_view;

static void compact_strides(foreign_view *v)
{
    int64_t s = fm_dtype_size(v->type_num);
    for (int i = v->ndim - 1; i >= 0; i--) {
        v->strides[i] = s;
        s *= v->shape[i];
    }
}

/* The driver's cuMemGetAddressRange (v2, CUDA 3.2+: 64-bit sizes). */
typedef int (*mem_range_fn)(unsigned long long *base, size_t *size, unsigned long long ptr);

/* Checks that `extent` bytes from `first` lie inside the one allocation
 * `first` is in, before any work is queued over them: a producer's claimed
 * shape is otherwise trusted up to its base pointer only. The driver knows
 * the allocation; fastmog links the runtime statically, so the driver call
 * is found through the runtime's entry-point query. ValueError if not. */
static int check_within_allocation(fm_state *st, const char *first, size_t extent,
                                   const char *argname)
{
    mem_range_fn range = (mem_range_fn)st->mem_get_address_range;
    if (range == NULL) {
        void *fn = NULL;
        enum cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
        cudaError_t err = cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 3020,
                                                           cudaEnableDefault, &found);
#else
        cudaError_t err = cudaGetDriverEntryPoint("cuMemGetAddressRange", &fn,
                                                  cudaEnableDefault, &found);
#endif
        if (err != cudaSuccess || found != cudaDriverEntryPointSuccess || fn == NULL)
            return fm_cuda_fail(st, err != cudaSuccess ? err : cudaErrorSymbolNotFound,
                                "finding the driver's cuMemGetAddressRange");
        st->mem_get_address_range = fn;
        range = (mem_range_fn)fn;
    }
    unsigned long long base = 0;
    size_t size = 0;
    int rc = range(&base, &size, (unsigned long long)(uintptr_t)first);
    unsigned long long at = (unsigned long long)(uintptr_t)first;
    if (rc != 0 || at < base || at - base > size || extent > size - (size_t)(at - base)) {
        PyErr_Format(PyExc_ValueError,
                     "%s claims %zu bytes from %p, beyond the device allocation it lies in "
                     "(%zu bytes from %p)%s", argname, extent, (const void *)first,
                     rc == 0 ? size : (size_t)0, (void *)(uintptr_t)base,
                     rc == 0 ? "" : ": the driver knows no allocation there");
        return -1;
    }
    return 0;
}

/* Checks the view as an image and wraps it, keeping `owner` alive. */
static fm_GpuMat *view_from_foreign(fm_state *st, foreign_view *v, PyObject *owner,
                                    const char *argname)
{
    fm_image_shape shape;
    if (fm_image_shape_make(v->ndim, v->shape, v->type_num, argname, &shape) < 0)
        return NULL;
    shape.readonly = v->readonly;
    if (!v->have_strides)
        compact_strides(v);
    int64_t elem = fm_dtype_size(v->type_num);
    int64_t row_bytes = (int64_t)fm_image_row_bytes(&shape);
    int pixels_ok = (v->ndim == 2 || v->strides[2] == elem || shape.channels == 1)
                    && (v->strides[1] == shape.channels * elem || shape.width == 1);
    if (shape.height == 1)
        v->strides[0] = row_bytes;
    if (!pixels_ok || v->strides[0] < row_bytes) {
        PyErr_Format(PyExc_ValueError,
                     "%s must have contiguous pixels within each row and rows in order "
                     "(strides %lld, %lld)", argname, (long long)v->strides[0],
                     (long long)v->strides[1]);
        return NULL;
    }
    /* A misaligned address would fault inside a kernel, and such a fault
     * ends the CUDA context: refuse it here. */
    if ((uintptr_t)v->data % (uintptr_t)elem != 0 || v->strides[0] % elem != 0) {
        PyErr_Format(PyExc_ValueError,
                     "%s is at %p with row pitch %lld: not aligned to its %d-byte values",
                     argname, (void *)v->data, (long long)v->strides[0],
                     (int)elem);
        return NULL;
    }
    struct cudaPointerAttributes attr;
    cudaError_t err = cudaPointerGetAttributes(&attr, v->data);
    if (err != cudaSuccess)
        return (fm_GpuMat *)fm_cuda_error(st, err, "finding the device of %s", argname);
    if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged) {
        PyErr_Format(PyExc_ValueError, "%s is not in device memory", argname);
        return NULL;
    }
    size_t size;
    if (__builtin_mul_overflow((size_t)v->strides[0], (size_t)(shape.height - 1), &size)
        || __builtin_add_overflow(size, (size_t)row_bytes, &size)) {
        PyErr_Format(PyExc_ValueError, "%s's extent does not fit in memory", argname);
        return NULL;
    }
    if (check_within_allocation(st, v->data, size, argname) < 0)
        return NULL;
    fm_DeviceBuffer *buffer = fm_device_buffer_wrap(st, attr.device, v->data, size, owner);
    if (buffer == NULL)
        return NULL;
    fm_GpuMat *m = fm_gpumat_view(st, buffer, v->data, (size_t)v->strides[0], &shape);
    Py_DECREF(buffer);
    return m;
}

static int cai_error(const char *argname, const char *key, PyObject *value, const char *expected)
{
    if (value == NULL)
        PyErr_Format(PyExc_ValueError, "%s.__cuda_array_interface__ has no '%s': expected %s",
                     argname, key, expected);
    else
        PyErr_Format(PyExc_ValueError,
                     "%s.__cuda_array_interface__['%s'] is %R: expected %s", argname, key,
                     value, expected);
    return -1;
}

/* A tuple or a list (producers differ) of up to `max` ints. */
static int int_sequence(PyObject *seq, int64_t *out, int max, int *n)
{
    if (!PyTuple_Check(seq) && !PyList_Check(seq))
        return -1;
    Py_ssize_t len = PySequence_Fast_GET_SIZE(seq);
    if (len > max)
        return -1;
    for (Py_ssize_t i = 0; i < len; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyLong_Check(item))
            return -1;
        int overflow;
        out[i] = PyLong_AsLongLongAndOverflow(item, &overflow);
        if (overflow || (out[i] == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            return -1;
        }
    }
    *n = (int)len;
    return 0;
}

/* What fastmog does with a producer's `stream`, per the CUDA Array Interface
 * (v3): absent or None, nothing (the producer says its data is ready); 1 the
 * legacy default stream; 2 the per-thread default stream; any other value a
 * cudaStream_t. 0 is ambiguous in the protocol; producers that give it
 * (PyNvVideoCodec does) are treated as the legacy default stream, the most
 * conservative reading: the consumer then waits for all of the legacy
 * stream's work, which also waits for every blocking stream. */
static cudaStream_t stream_from_protocol(unsigned long long v)
{
    return v <= 1 ? cudaStreamLegacy : protocol_int_to_stream((uintptr_t)v);
}

static fm_GpuMat *from_cuda_array_interface(fm_state *st, PyObject *obj, PyObject *cai,
                                            const char *argname, fm_Stream *stream)
{
    foreign_view v;
    memset(&v, 0, sizeof v);
    if (!PyDict_Check(cai)) {
        PyErr_Format(PyExc_TypeError, "%s.__cuda_array_interface__ must be a dict, not %.200s",
                     argname, Py_TYPE(cai)->tp_name);
        return NULL;
    }
    PyObject *shape = PyDict_GetItemString(cai, "shape");
    PyObject *typestr = PyDict_GetItemString(cai, "typestr");
    PyObject *data = PyDict_GetItemString(cai, "data");
    PyObject *strides = PyDict_GetItemString(cai, "strides");
    PyObject *mask = PyDict_GetItemString(cai, "mask");
    PyObject *producer = PyDict_GetItemString(cai, "stream");
    int n_strides = 0;

    if (shape == NULL || int_sequence(shape, v.shape, 3, &v.ndim) < 0 || v.ndim < 2) {
        cai_error(argname, "shape", shape, "a tuple or list of 2 or 3 ints (H, W[, C])");
        return NULL;
    }
    if (typestr == NULL || !PyUnicode_Check(typestr)) {
        cai_error(argname, "typestr", typestr, "a numpy type string such as '|u1'");
        return NULL;
    }
    PyArray_Descr *descr = NULL;
    if (!PyArray_DescrConverter(typestr, &descr))
        return NULL;
    v.type_num = fm_dtype_from_descr(descr);
    Py_DECREF(descr);
    if (v.type_num < 0) {
        PyErr_Format(PyExc_TypeError,
                     "%s.__cuda_array_interface__['typestr'] is %R: expected little-endian "
                     "uint8, int8, uint16, int16, uint32, int32, float32 or float64",
                     argname, typestr);
        return NULL;
    }
    if (data == NULL || (!PyTuple_Check(data) && !PyList_Check(data))
        || PySequence_Fast_GET_SIZE(data) != 2
        || !PyLong_Check(PySequence_Fast_GET_ITEM(data, 0))) {
        cai_error(argname, "data", data, "(pointer, read_only)");
        return NULL;
    }
    unsigned long long ptr = PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(data, 0));
    if (ptr == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    v.data = (char *)(uintptr_t)ptr;
    if ((v.readonly = PyObject_IsTrue(PySequence_Fast_GET_ITEM(data, 1))) < 0)
        return NULL;
    if (strides != NULL && strides != Py_None) {
        if (int_sequence(strides, v.strides, 3, &n_strides) < 0 || n_strides != v.ndim) {
            cai_error(argname, "strides", strides, "None or one int (bytes) per dimension");
            return NULL;
        }
        v.have_strides = 1;
    }
    if (mask != NULL && mask != Py_None) {
        cai_error(argname, "mask", mask, "None: masked arrays are not supported");
        return NULL;
    }
    if (ptr == 0) {
        cai_error(argname, "data", data, "a device pointer, not 0");
        return NULL;
    }
    cudaStream_t from = NULL;
    int ordered = producer != NULL && producer != Py_None;
    if (ordered) {
        unsigned long long p = PyLong_Check(producer) ? PyLong_AsUnsignedLongLong(producer)
                                                       : (unsigned long long)-1;
        if (p == (unsigned long long)-1) {
            PyErr_Clear();
            cai_error(argname, "stream", producer, "None or a stream handle (int)");
            return NULL;
        }
        from = stream_from_protocol(p);
    }
    fm_GpuMat *m = view_from_foreign(st, &v, obj, argname);
    if (m != NULL && ordered && m->device == stream->device
        && fm_stream_order(st, stream->device, from, stream->handle) < 0)
        Py_CLEAR(m);
    return m;
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

/* Asks for a capsule made for our stream: versioned first; older producers
 * refuse the max_version keyword. */
static PyObject *request_capsule(PyObject *obj, fm_Stream *stream)
{
    PyObject *capsule = NULL;
    PyObject *kw = Py_BuildValue("{s:K,s:(ii)}", "stream",
                                 (unsigned long long)stream_to_protocol_int(stream->handle),
                                 "max_version", FM_DLPACK_MAJOR, FM_DLPACK_MINOR);
    PyObject *method = PyObject_GetAttrString(obj, "__dlpack__");
    PyObject *empty = PyTuple_New(0);
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
    return capsule;
}

static fm_GpuMat *from_dlpack(fm_state *st, PyObject *obj, const char *argname,
                              fm_Stream *stream)
{
    PyObject *owner = NULL;
    fm_GpuMat *result = NULL;
    fm_dl_tensor *t;
    foreign_view v;
    memset(&v, 0, sizeof v);

    PyObject *capsule = request_capsule(obj, stream);
    if (capsule == NULL)
        return NULL;
    if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
        fm_dl_managed_versioned *mt = PyCapsule_GetPointer(capsule, "dltensor_versioned");
        if (mt->version_major > FM_DLPACK_MAJOR) {
            PyErr_Format(PyExc_BufferError, "%s's DLPack version %u is too new", argname,
                         (unsigned)mt->version_major);
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
        PyErr_Format(PyExc_TypeError, "%s.__dlpack__() did not return a DLPack capsule",
                     argname);
        goto error;
    }
    if (owner == NULL)
        goto error;
    if (t->device.device_type != FM_DL_CUDA && t->device.device_type != FM_DL_CUDA_MANAGED) {
        PyErr_Format(PyExc_ValueError, "%s is not in CUDA device memory", argname);
        goto error;
    }
    v.ndim = t->ndim;
    v.type_num = fm_dtype_from_dlpack(t->dtype.code, t->dtype.bits, t->dtype.lanes);
    v.data = (char *)t->data + t->byte_offset;
    if (v.ndim >= 2 && v.ndim <= 3) {
        for (int i = 0; i < v.ndim; i++) {
            v.shape[i] = t->shape[i];
            if (t->strides != NULL)
                v.strides[i] = t->strides[i] * fm_dtype_size(v.type_num);
        }
        v.have_strides = t->strides != NULL;
    }
    result = view_from_foreign(st, &v, owner, argname);
error:
    Py_XDECREF(owner);
    Py_DECREF(capsule);
    return result;
}

/* The object that carries the memory: `obj`, or the first plane its cuda()
 * or `planes` gives (video decoders hand out frames that way). New ref. */
static PyObject *memory_carrier(PyObject *obj)
{
    if (PyObject_HasAttrString(obj, "__cuda_array_interface__")
        || PyObject_HasAttrString(obj, "__dlpack__"))
        return Py_NewRef(obj);
    PyObject *planes = NULL;
    if (PyObject_HasAttrString(obj, "cuda")) {
        PyObject *method = PyObject_GetAttrString(obj, "cuda");
        planes = method != NULL && PyCallable_Check(method) ? PyObject_CallNoArgs(method) : NULL;
        Py_XDECREF(method);
        if (planes == NULL && PyErr_Occurred())
            return NULL;
    }
    else if (PyObject_HasAttrString(obj, "planes")) {
        if ((planes = PyObject_GetAttrString(obj, "planes")) == NULL)
            return NULL;
    }
    if (planes != NULL && (PyList_Check(planes) || PyTuple_Check(planes))) {
        PyObject *first = PySequence_Fast_GET_SIZE(planes) > 0
                              ? Py_NewRef(PySequence_Fast_GET_ITEM(planes, 0)) : NULL;
        Py_DECREF(planes);
        planes = first;
    }
    if (planes != NULL && !PyObject_HasAttrString(planes, "__cuda_array_interface__")
        && !PyObject_HasAttrString(planes, "__dlpack__"))
        Py_CLEAR(planes);
    return planes;
}

int fm_is_device_array(PyObject *obj)
{
    return PyObject_HasAttrString(obj, "__cuda_array_interface__")
           || PyObject_HasAttrString(obj, "__dlpack__") || PyObject_HasAttrString(obj, "cuda")
           || PyObject_HasAttrString(obj, "planes");
}

fm_GpuMat *fm_view_device_array(fm_state *st, PyObject *obj, const char *argname,
                                fm_Stream *stream)
{
    PyObject *carrier = memory_carrier(obj);
    fm_GpuMat *m = NULL;
    if (carrier == NULL) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_TypeError,
                         "cannot view %.200s as an image: it has neither "
                         "__cuda_array_interface__ nor __dlpack__ (nor a cuda() giving them)",
                         Py_TYPE(obj)->tp_name);
        return NULL;
    }
    if (PyObject_HasAttrString(carrier, "__cuda_array_interface__")) {
        PyObject *cai = PyObject_GetAttrString(carrier, "__cuda_array_interface__");
        if (cai != NULL)
            m = from_cuda_array_interface(st, carrier, cai, argname, stream);
        Py_XDECREF(cai);
    }
    else {
        m = from_dlpack(st, carrier, argname, stream);
    }
    Py_DECREF(carrier);
    return m;
}
