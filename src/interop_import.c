/* Other libraries' device memory viewed as a GpuMat, without copies: the CUDA
 * Array Interface (v2, v3) and DLPack; what fastmog does with each producer's
 * `stream` is written at stream_from_protocol(). */
#include "interop.h"

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
        cudaError_t err = fm_driver_function("cuMemGetAddressRange", 3020, &fn);
        if (err != cudaSuccess)
            return fm_cuda_fail(st, err, "finding the driver's cuMemGetAddressRange");
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

/* Reads a dict that no one else holds (from_cuda_array_interface's copy). */
static fm_GpuMat *cai_view(fm_state *st, PyObject *obj, PyObject *cai, const char *argname,
                           fm_Stream *stream)
{
    foreign_view v;
    memset(&v, 0, sizeof v);
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
static fm_GpuMat *from_cuda_array_interface(fm_state *st, PyObject *obj, PyObject *cai,
                                            const char *argname, fm_Stream *stream)
{
    if (!PyDict_Check(cai)) {
        PyErr_Format(PyExc_TypeError, "%s.__cuda_array_interface__ must be a dict, not %.200s",
                     argname, Py_TYPE(cai)->tp_name);
        return NULL;
    }
    /* Reading the entries runs the producer's code (a read-only flag's
     * __bool__, an int's __index__), which may change its dict or lists: the
     * parse reads a copy of its own, each list as a tuple. */
    static const char *const lists[] = {"shape", "data", "strides"};
    fm_GpuMat *m = NULL;
    PyObject *copy = PyDict_Copy(cai);
    if (copy == NULL)
        return NULL;
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
        PyObject *item = PyDict_GetItemString(copy, lists[i]);
        if (item != NULL && PyList_Check(item)) {
            PyObject *tuple = PyList_AsTuple(item);
            int rc = tuple != NULL ? PyDict_SetItemString(copy, lists[i], tuple) : -1;
            Py_XDECREF(tuple);
            if (rc < 0)
                goto done;
        }
    }
    m = cai_view(st, obj, copy, argname, stream);
done:
    Py_DECREF(copy);
    return m;
}

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
    const char *used;
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
        owner = PyCapsule_New(mt, "fastmog.dlpack_import_v1", imported_versioned_destructor);
        used = "used_dltensor_versioned";
    }
    else if (PyCapsule_IsValid(capsule, "dltensor")) {
        fm_dl_managed *mt = PyCapsule_GetPointer(capsule, "dltensor");
        t = &mt->dl_tensor;
        owner = PyCapsule_New(mt, "fastmog.dlpack_import", imported_legacy_destructor);
        used = "used_dltensor";
    }
    else {
        PyErr_Format(PyExc_TypeError, "%s.__dlpack__() did not return a DLPack capsule",
                     argname);
        goto error;
    }
    if (owner == NULL)
        goto error;
    /* Consumed only now that its owner exists (NumPy's dlpack.c renames last):
     * on any failure before, the producer's capsule still frees the tensor. */
    if (PyCapsule_SetName(capsule, used) < 0) {
        (void)PyCapsule_SetDestructor(owner, NULL);
        goto error;
    }
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
