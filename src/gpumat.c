/* fastmog.GpuMat: a pitched device image and its views; its copies to and
 * from the host are transfer.c's, its protocol exports interop_export.c's. */
#include "fastmog.h"
#include "docstrings.h"

#include <math.h>
#include <structmember.h>

/* Rows start on 256-byte boundaries, as cudaMallocPitch would give. */
#define FM_PITCH_ALIGN ((size_t)256)

const fm_image_rule fm_gpumat_rule = {0, FM_IMAGE_CHANNELS};

int fm_check_same_device(const fm_GpuMat *m, int device, const char *argname)
{
    if (m->device != device) {
        PyErr_Format(PyExc_ValueError, "%s is on device %d but the work is on device %d",
                     argname, m->device, device);
        return -1;
    }
    return 0;
}

fm_GpuMat *fm_gpumat_out(fm_state *st, PyObject *out_arg, const fm_image_rule *rule,
                         int device, const fm_image_shape *shape)
{
    if (out_arg == Py_None)
        return fm_gpumat_new(st, device, shape);
    fm_GpuMat *out = fm_gpumat_check_open(st, out_arg, "out");
    if (out == NULL || fm_image_rule_check(rule, &out->shape, "out") < 0
        || fm_check_same_device(out, device, "out") < 0)
        return NULL;
    return (fm_GpuMat *)Py_NewRef(out);
}

static int check_writable(fm_GpuMat *m, const char *argname)
{
    if (m->shape.readonly) {
        PyErr_Format(PyExc_ValueError, "%s is a read-only view of foreign memory", argname);
        return -1;
    }
    return 0;
}

fm_GpuMat *fm_gpumat_view(fm_state *st, fm_DeviceBuffer *buffer, char *data, size_t pitch,
                          const fm_image_shape *shape)
{
    fm_GpuMat *m = (fm_GpuMat *)st->GpuMat_type->tp_alloc(st->GpuMat_type, 0);
    if (m == NULL)
        return NULL;
    m->buffer = (fm_DeviceBuffer *)Py_NewRef(buffer);
    m->data = data;
    m->pitch = pitch;
    m->shape = *shape;
    m->device = buffer->device;
    m->cai_exported = 0;
    m->closed = 0;
    return m;
}

fm_GpuMat *fm_gpumat_new(fm_state *st, int device, const fm_image_shape *shape)
{
    size_t row_bytes = fm_image_row_bytes(shape);
    size_t pitch = (row_bytes + FM_PITCH_ALIGN - 1) / FM_PITCH_ALIGN * FM_PITCH_ALIGN;
    char what[96];
    snprintf(what, sizeof what, "a %dx%dx%d %s GpuMat", shape->height, shape->width,
             shape->channels, fm_dtype_name(shape->type_num));
    fm_DeviceBuffer *buffer = fm_device_buffer_alloc(st, device, pitch * (size_t)shape->height,
                                                     what);
    if (buffer == NULL)
        return NULL;
    fm_image_shape writable = *shape;
    writable.readonly = 0;
    fm_GpuMat *m = fm_gpumat_view(st, buffer, buffer->ptr, pitch, &writable);
    Py_DECREF(buffer);
    return m;
}

/* Parses (height, width) or (height, width, channels) and a dtype. */
static int parse_shape(PyObject *shape, PyObject *dtype, fm_image_shape *out)
{
    int64_t dims[3] = {0, 0, 1};
    int type_num = NPY_UINT8;
    if (dtype != NULL && dtype != Py_None) {
        PyArray_Descr *descr = NULL;
        if (!PyArray_DescrConverter(dtype, &descr))
            return -1;
        type_num = fm_dtype_from_descr(descr);
        Py_DECREF(descr);
        if (type_num < 0) {
            PyErr_Format(PyExc_TypeError,
                         "dtype %R is not supported: use uint8, int8, uint16, int16, "
                         "uint32, int32, float32 or float64", dtype);
            return -1;
        }
    }
    PyObject *seq = PySequence_Fast(shape, "shape must be a tuple of 2 or 3 ints");
    if (seq == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n && i < 3; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        int overflow = 0;
        long long v = PyLong_Check(item) ? PyLong_AsLongLongAndOverflow(item, &overflow) : -1;
        if (!PyLong_Check(item) || (v == -1 && PyErr_Occurred())) {
            Py_DECREF(seq);
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "shape must contain ints, got %R", shape);
            return -1;
        }
        dims[i] = overflow ? (overflow > 0 ? INT64_MAX : INT64_MIN) : v;
    }
    Py_DECREF(seq);
    if (fm_image_shape_make((int)n, dims, type_num, "shape", out) < 0)
        return -1;
    return fm_image_rule_check(&fm_gpumat_rule, out, "shape");
}

static PyObject *GpuMat_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"shape", "dtype", "device", NULL};
    fm_state *st = fm_state_of_type(type);
    PyObject *shape_arg, *dtype = Py_None, *device_arg = Py_None;
    fm_image_shape shape;
    fm_device_guard guard;
    int device;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O$O:GpuMat", kwlist,
                                     &shape_arg, &dtype, &device_arg))
        return NULL;
    if (parse_shape(shape_arg, dtype, &shape) < 0 || fm_resolve_device(st, device_arg, &device) < 0
        || fm_device_enter(st, device, &guard) < 0)
        return NULL;
    fm_GpuMat *m = fm_gpumat_new(st, device, &shape);
    fm_device_exit(&guard);
    return (PyObject *)m;
}

/* ---- copies to and from the host ------------------------------------------- */

/* Parses `(arg, /, *, stream, timer=None)`, the signature upload, copy_to and
 * fill share; `format` names the method ("O|$OO:name"). */
static int parse_arg_stream_timer(PyObject *args, PyObject *kwargs, const char *format,
                                  PyObject **arg, PyObject **stream_arg, PyObject **timer)
{
    static char *kwlist[] = {"", "stream", "timer", NULL};
    *stream_arg = *timer = NULL;
    return PyArg_ParseTupleAndKeywords(args, kwargs, format, kwlist, arg, stream_arg, timer)
               ? 0 : -1;
}

/* What a method that queues work on self checks first: self open (and
 * writable when the work writes it), then `stream_arg` a stream on its
 * device. Returns self (borrowed) with *stream set, or NULL. */
static fm_GpuMat *open_on_stream(fm_state *st, PyObject *op, PyObject *stream_arg, int writable,
                                 fm_Stream **stream)
{
    fm_GpuMat *m = fm_gpumat_check_open(st, op, "self");
    if (m == NULL || (writable && check_writable(m, "self") < 0))
        return NULL;
    *stream = fm_require_stream(st, stream_arg, m->device);
    return *stream != NULL ? m : NULL;
}

/* Holds `stream` (stream.c's rule: staging and waits release the GIL),
 * starts the timed call of a method on an image of `shape`, then enters
 * `device`; if that fails, undoes it all. 0, or -1 with an exception set.
 * end_on_device() undoes it after the work. */
static int begin_on_device(fm_state *st, fm_call *call, const char *name, const char *activity,
                           PyObject *timer, fm_Stream *stream, const fm_image_shape *shape,
                           int device, fm_device_guard *guard)
{
    if (fm_stream_hold(stream) < 0)
        return -1;
    if (fm_call_begin(st, call, name, activity, timer, stream, shape->height, shape->width,
                      shape->channels) < 0) {
        fm_stream_unhold(stream);
        return -1;
    }
    if (fm_device_enter(st, device, guard) < 0) {
        (void)fm_call_end(st, call, NULL);
        fm_stream_unhold(stream);
        return -1;
    }
    return 0;
}

static PyObject *end_on_device(fm_state *st, fm_call *call, fm_device_guard *guard,
                               fm_Stream *stream, PyObject *result)
{
    fm_device_exit(guard);
    result = fm_call_end(st, call, result);
    fm_stream_unhold(stream);
    return result;
}

/* The timed "GpuMat.upload" call that upload() and from_array() make: copies
 * `src` into `m`, or into a new GpuMat on `device` when m is NULL. Returns
 * the destination (a new reference), or NULL. */
static fm_GpuMat *upload_call(fm_state *st, fm_GpuMat *m, const fm_host_image *src,
                              fm_Stream *stream, int device, PyObject *timer)
{
    fm_device_guard guard;
    fm_call call;
    if (begin_on_device(st, &call, "GpuMat.upload", "memcpy HtoD", timer, stream, &src->shape,
                        device, &guard) < 0)
        return NULL;
    m = m != NULL ? (fm_GpuMat *)Py_NewRef(m) : fm_gpumat_new(st, device, &src->shape);
    if (m != NULL && fm_upload(st, m, src, stream, FM_USE_RELEASE_AFTER, &call) < 0)
        Py_CLEAR(m);
    return (fm_GpuMat *)end_on_device(st, &call, &guard, stream, (PyObject *)m);
}

/* The rule a host array must meet to be copied into or out of `m`. */
static fm_image_rule same_as(const fm_GpuMat *m, int writable)
{
    fm_image_rule rule = {FM_DTYPE_BIT(m->shape.type_num), FM_CHANNELS_BIT(m->shape.channels),
                          m->shape.height, m->shape.width, "the GpuMat", writable};
    return rule;
}

static PyObject *GpuMat_upload(PyObject *op, PyObject *args, PyObject *kwargs)
{
    PyObject *array_arg, *stream_arg, *timer;
    fm_state *st = fm_state_of(op);
    fm_Stream *stream;
    fm_host_image src;

    if (parse_arg_stream_timer(args, kwargs, "O|$OO:upload", &array_arg, &stream_arg, &timer) < 0)
        return NULL;
    fm_GpuMat *m = open_on_stream(st, op, stream_arg, 1, &stream);
    if (m == NULL)
        return NULL;
    fm_image_rule rule = same_as(m, 0);
    if (fm_host_image_check(array_arg, "array", &rule, &src) < 0)
        return NULL;
    fm_GpuMat *copied = upload_call(st, m, &src, stream, m->device, timer);
    if (copied == NULL)
        return NULL;
    Py_DECREF(copied);
    Py_RETURN_NONE;
}

static PyObject *GpuMat_from_array(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"", "stream", "device", "timer", NULL};
    fm_state *st = fm_state_of_type(type);
    PyObject *array_arg, *stream_arg = NULL, *device_arg = Py_None, *timer = NULL;
    fm_host_image src;
    int device;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$OOO:from_array", kwlist,
                                     &array_arg, &stream_arg, &device_arg, &timer))
        return NULL;
    if (fm_host_image_check(array_arg, "array", &fm_gpumat_rule, &src) < 0)
        return NULL;
    fm_Stream *stream = fm_require_stream(st, stream_arg, -1);
    if (stream == NULL)
        return NULL;
    device = stream->device;
    if (device_arg != Py_None && (fm_resolve_device(st, device_arg, &device) < 0
                                  || fm_require_stream(st, stream_arg, device) == NULL))
        return NULL;
    return (PyObject *)upload_call(st, NULL, &src, stream, device, timer);
}

static PyObject *GpuMat_download(PyObject *op, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"out", "stream", "blocking", "timer", NULL};
    PyObject *out_arg = Py_None, *stream_arg = NULL, *timer = NULL;
    int blocking = 1;
    fm_state *st = fm_state_of(op);
    fm_Stream *stream;
    fm_host_image dst;
    fm_device_guard guard;
    fm_call call;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O$OpO:download", kwlist,
                                     &out_arg, &stream_arg, &blocking, &timer))
        return NULL;
    fm_GpuMat *m = open_on_stream(st, op, stream_arg, 0, &stream);
    if (m == NULL)
        return NULL;
    fm_image_rule rule = same_as(m, 1);
    if ((out_arg != Py_None && fm_host_image_check(out_arg, "out", &rule, &dst) < 0)
        || begin_on_device(st, &call, "GpuMat.download", "memcpy DtoH", timer, stream, &m->shape,
                           m->device, &guard) < 0)
        return NULL;
    PyObject *result = fm_download(st, m, out_arg != Py_None ? &dst : NULL, blocking, stream,
                                   &call);
    return end_on_device(st, &call, &guard, stream, result);
}

fm_GpuMat *fm_gpumat_copy_pair(fm_state *st, PyObject *src_arg, PyObject *dst_arg,
                               const char *dst_name, fm_GpuMat **dst)
{
    fm_GpuMat *src = fm_gpumat_check_open(st, src_arg, "self");
    *dst = src ? fm_gpumat_check_open(st, dst_arg, dst_name) : NULL;
    if (*dst == NULL || check_writable(*dst, dst_name) < 0)
        return NULL;
    const fm_image_shape *a = &src->shape, *b = &(*dst)->shape;
    if (a->height != b->height || a->width != b->width || a->channels != b->channels
        || a->type_num != b->type_num) {
        PyErr_Format(PyExc_ValueError, "%s is %dx%dx%d %s but self is %dx%dx%d %s", dst_name,
                     b->height, b->width, b->channels, fm_dtype_name(b->type_num), a->height,
                     a->width, a->channels, fm_dtype_name(a->type_num));
        return NULL;
    }
    if (src->device != (*dst)->device) {
        PyErr_Format(PyExc_ValueError, "%s is on device %d but self is on device %d", dst_name,
                     (*dst)->device, src->device);
        return NULL;
    }
    return src;
}

int fm_gpumat_copy_use(fm_state *st, fm_GpuMat *src, fm_GpuMat *dst, fm_Stream *stream)
{
    return fm_device_buffer_use(st, src->buffer, stream, FM_USE_RELEASE_AFTER) < 0
                   || fm_device_buffer_use(st, dst->buffer, stream, FM_USE_RELEASE_AFTER) < 0
               ? -1 : 0;
}

int fm_gpumat_copy_queue(fm_state *st, fm_GpuMat *src, fm_GpuMat *dst, fm_Stream *stream,
                         fm_call *call)
{
    size_t row_bytes = fm_image_row_bytes(&src->shape);
    cudaError_t err;
    if (src->pitch == row_bytes && dst->pitch == row_bytes)  /* one flat copy is faster */
        err = cudaMemcpyAsync(dst->data, src->data, row_bytes * (size_t)src->shape.height,
                              cudaMemcpyDeviceToDevice, stream->handle);
    else
        err = cudaMemcpy2DAsync(dst->data, dst->pitch, src->data, src->pitch, row_bytes,
                                (size_t)src->shape.height, cudaMemcpyDeviceToDevice,
                                stream->handle);
    if (err != cudaSuccess)
        return fm_cuda_fail(st, err, "copying a %dx%dx%d image", src->shape.height,
                            src->shape.width, src->shape.channels);
    fm_call_bytes(call, (int64_t)(row_bytes * src->shape.height),
                  (int64_t)(row_bytes * src->shape.height));
    return 0;
}

static PyObject *GpuMat_copy_to(PyObject *op, PyObject *args, PyObject *kwargs)
{
    PyObject *other_arg, *stream_arg, *timer;
    fm_state *st = fm_state_of(op);
    fm_device_guard guard;
    fm_call call;
    fm_GpuMat *dst;

    if (parse_arg_stream_timer(args, kwargs, "O|$OO:copy_to", &other_arg, &stream_arg, &timer) < 0)
        return NULL;
    fm_GpuMat *src = fm_gpumat_copy_pair(st, op, other_arg, "other", &dst);
    if (src == NULL)
        return NULL;
    fm_Stream *stream = fm_require_stream(st, stream_arg, src->device);
    if (stream == NULL)
        return NULL;
    if (begin_on_device(st, &call, "GpuMat.copy_to", "memcpy DtoD", timer, stream, &src->shape,
                        src->device, &guard) < 0)
        return NULL;
    int rc = fm_gpumat_copy_use(st, src, dst, stream) < 0 ? -1 : fm_call_gpu_begin(st, &call);
    if (rc == 0) {
        fm_call_gpu_submitted(&call);           /* before a copy: see fastmog.h */
        rc = fm_gpumat_copy_queue(st, src, dst, stream, &call) < 0 ? -1
                                                                     : fm_call_gpu_end(st, &call);
    }
    return end_on_device(st, &call, &guard, stream, rc == 0 ? Py_NewRef(Py_None) : NULL);
}

/* Stores `value` as one value of `type_num`, refusing values it cannot hold. */
static int store_value(double value, int type_num, unsigned char *out)
{
    double lo = 0, hi = 0;
    switch (type_num) {
    case NPY_FLOAT32: { float f = (float)value; memcpy(out, &f, 4); return 0; }
    case NPY_FLOAT64: memcpy(out, &value, 8); return 0;
    case NPY_UINT8: lo = 0; hi = UINT8_MAX; break;
    case NPY_INT8: lo = INT8_MIN; hi = INT8_MAX; break;
    case NPY_UINT16: lo = 0; hi = UINT16_MAX; break;
    case NPY_INT16: lo = INT16_MIN; hi = INT16_MAX; break;
    case NPY_UINT32: lo = 0; hi = UINT32_MAX; break;
    case NPY_INT32: lo = INT32_MIN; hi = INT32_MAX; break;
    default: return -1;
    }
    if (!(value >= lo && value <= hi) || value != floor(value)) {
        PyObject *shown = PyFloat_FromDouble(value);
        if (shown != NULL)
            PyErr_Format(PyExc_ValueError, "fill value %R does not fit in %s", shown,
                         fm_dtype_name(type_num));
        Py_XDECREF(shown);
        return -1;
    }
    int64_t v = (int64_t)value;
    switch (fm_dtype_size(type_num)) {
    case 1: { uint8_t x = (uint8_t)v; memcpy(out, &x, 1); break; }
    case 2: { uint16_t x = (uint16_t)v; memcpy(out, &x, 2); break; }
    default: { uint32_t x = (uint32_t)v; memcpy(out, &x, 4); break; }
    }
    return 0;
}

static PyObject *GpuMat_fill(PyObject *op, PyObject *args, PyObject *kwargs)
{
    PyObject *value_arg, *stream_arg, *timer;
    fm_state *st = fm_state_of(op);
    fm_Stream *stream;
    fm_fill_pattern pattern;
    fm_device_guard guard;
    fm_call call;

    if (parse_arg_stream_timer(args, kwargs, "O|$OO:fill", &value_arg, &stream_arg, &timer) < 0)
        return NULL;
    fm_GpuMat *m = open_on_stream(st, op, stream_arg, 1, &stream);
    if (m == NULL)
        return NULL;

    memset(&pattern, 0, sizeof pattern);
    int is_number = PyNumber_Check(value_arg) && !PySequence_Check(value_arg);
    PyObject *seq = is_number ? NULL
                              : PySequence_Fast(value_arg, "value must be a number or a sequence");
    if (!is_number && seq == NULL)
        return NULL;
    Py_ssize_t n = is_number ? 1 : PySequence_Fast_GET_SIZE(seq);
    if (!is_number && n != m->shape.channels) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "value has %zd items but the image has %d channel%s",
                     n, m->shape.channels, m->shape.channels == 1 ? "" : "s");
        return NULL;
    }
    for (int c = 0; c < m->shape.channels; c++) {
        PyObject *item = is_number ? value_arg : PySequence_Fast_GET_ITEM(seq, c);
        double v = PyFloat_AsDouble(item);
        if ((v == -1.0 && PyErr_Occurred())
            || store_value(v, m->shape.type_num, &pattern.bytes[c * fm_dtype_size(m->shape.type_num)]) < 0) {
            Py_XDECREF(seq);
            return NULL;
        }
    }
    Py_XDECREF(seq);

    int pixel_bytes = m->shape.channels * fm_dtype_size(m->shape.type_num), uniform = 1;
    for (int i = 1; i < pixel_bytes; i++)
        uniform &= pattern.bytes[i] == pattern.bytes[0];
    if (begin_on_device(st, &call, "GpuMat.fill", uniform ? "memset" : "kernel fill", timer,
                        stream, &m->shape, m->device, &guard) < 0)
        return NULL;
    cudaError_t err = cudaSuccess;
    if (fm_device_buffer_use(st, m->buffer, stream, FM_USE_RELEASE_AFTER) == 0
        && fm_call_gpu_begin(st, &call) == 0) {
        err = uniform ? cudaMemset2DAsync(m->data, m->pitch, pattern.bytes[0],
                                          fm_image_row_bytes(&m->shape), (size_t)m->shape.height,
                                          stream->handle)
                      : fm_launch_fill(fm_gpumat_image(m), pattern, stream->handle);
        if (err != cudaSuccess)
            fm_cuda_error(st, err, "filling a %dx%dx%d image", m->shape.height, m->shape.width, m->shape.channels);
        else
            (void)fm_call_gpu_end(st, &call);
        fm_call_bytes(&call, 0, (int64_t)fm_image_row_bytes(&m->shape) * m->shape.height);
    }
    return end_on_device(st, &call, &guard, stream, PyErr_Occurred() ? NULL : Py_NewRef(Py_None));
}

/* ---- views ------------------------------------------------------------- */

static int slice_range(PyObject *key, int length, const char *axis, int *start, int *stop)
{
    Py_ssize_t a, b, step;
    if (!PySlice_Check(key)) {
        PyErr_Format(PyExc_TypeError, "GpuMat %s index must be a slice, not %.200s", axis, Py_TYPE(key)->tp_name);
        return -1;
    }
    if (PySlice_Unpack(key, &a, &b, &step) < 0)
        return -1;
    if (step != 1) {
        PyErr_Format(PyExc_ValueError, "GpuMat %s slice step must be 1", axis);
        return -1;
    }
    PySlice_AdjustIndices(length, &a, &b, step);
    if (b <= a) {
        PyErr_Format(PyExc_ValueError, "GpuMat %s slice selects nothing", axis);
        return -1;
    }
    *start = (int)a;
    *stop = (int)b;
    return 0;
}

static PyObject *make_roi(fm_state *st, fm_GpuMat *m, int x, int y, int width, int height)
{
    size_t pixel = (size_t)m->shape.channels * (size_t)fm_dtype_size(m->shape.type_num);
    fm_image_shape shape = m->shape;
    shape.height = height;
    shape.width = width;
    return (PyObject *)fm_gpumat_view(st, m->buffer, m->data + (size_t)y * m->pitch
                                      + (size_t)x * pixel, m->pitch, &shape);
}

static PyObject *GpuMat_subscript(PyObject *op, PyObject *key)
{
    fm_state *st = fm_state_of(op);
    fm_GpuMat *m = fm_gpumat_check_open(st, op, "self");
    if (m == NULL)
        return NULL;
    PyObject *rows = key, *cols = NULL, *chans = NULL;
    if (PyTuple_Check(key)) {
        Py_ssize_t n = PyTuple_GET_SIZE(key);
        if (n < 1 || n > 3) {
            PyErr_SetString(PyExc_IndexError, "GpuMat takes [rows, cols] slices");
            return NULL;
        }
        rows = PyTuple_GET_ITEM(key, 0);
        cols = n > 1 ? PyTuple_GET_ITEM(key, 1) : NULL;
        chans = n > 2 ? PyTuple_GET_ITEM(key, 2) : NULL;
    }
    int y0, y1, x0 = 0, x1 = m->shape.width;
    if (slice_range(rows, m->shape.height, "row", &y0, &y1) < 0)
        return NULL;
    if (cols != NULL && slice_range(cols, m->shape.width, "column", &x0, &x1) < 0)
        return NULL;
    if (chans != NULL) {
        int c0, c1;
        if (slice_range(chans, m->shape.channels, "channel", &c0, &c1) < 0)
            return NULL;
        if (c0 != 0 || c1 != m->shape.channels) {
            PyErr_SetString(PyExc_ValueError, "a GpuMat view keeps every channel");
            return NULL;
        }
    }
    return make_roi(st, m, x0, y0, x1 - x0, y1 - y0);
}

static PyObject *GpuMat_roi(PyObject *op, PyObject *args)
{
    int x, y, w, h;
    if (!PyArg_ParseTuple(args, "iiii:roi", &x, &y, &w, &h))
        return NULL;
    fm_state *st = fm_state_of(op);
    fm_GpuMat *m = fm_gpumat_check_open(st, op, "self");
    if (m == NULL)
        return NULL;
    if (x < 0 || y < 0 || w < 1 || h < 1 || x > m->shape.width - w || y > m->shape.height - h) {
        PyErr_Format(PyExc_ValueError,
                     "roi (x=%d, y=%d, width=%d, height=%d) is not inside the %dx%d image",
                     x, y, w, h, m->shape.width, m->shape.height);
        return NULL;
    }
    return make_roi(st, m, x, y, w, h);
}

/* ---- lifetime ---------------------------------------------------------- */

static PyObject *GpuMat_close(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    fm_GpuMat *m = (fm_GpuMat *)op;
    m->closed = 1;
    if (!m->cai_exported)
        Py_CLEAR(m->buffer);
    Py_RETURN_NONE;
}

static PyObject *GpuMat_enter(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    if (fm_gpumat_check_open(fm_state_of(op), op, "self") == NULL)
        return NULL;
    return Py_NewRef(op);
}

static PyObject *GpuMat_exit(PyObject *op, PyObject *Py_UNUSED(args))
{
    return GpuMat_close(op, NULL);
}

static int GpuMat_traverse(PyObject *op, visitproc visit, void *arg)
{
    Py_VISIT(((fm_GpuMat *)op)->buffer);
    Py_VISIT(Py_TYPE(op));
    return 0;
}

static int GpuMat_clear(PyObject *op)
{
    Py_CLEAR(((fm_GpuMat *)op)->buffer);
    return 0;
}

static void GpuMat_dealloc(PyObject *op)
{
    fm_gc_dealloc(op, GpuMat_clear);
}

/* ---- attributes -------------------------------------------------------- */

static fm_GpuMat *open_self(PyObject *op)
{
    return fm_gpumat_check_open(fm_state_of(op), op, "self");
}

static PyObject *GpuMat_get_shape(PyObject *op, void *Py_UNUSED(closure))
{
    fm_GpuMat *m = (fm_GpuMat *)op;
    if (m->shape.ndim == 3)
        return Py_BuildValue("(iii)", m->shape.height, m->shape.width, m->shape.channels);
    return Py_BuildValue("(ii)", m->shape.height, m->shape.width);
}

static PyObject *GpuMat_get_dtype(PyObject *op, void *Py_UNUSED(closure))
{
    return (PyObject *)PyArray_DescrFromType(((fm_GpuMat *)op)->shape.type_num);
}

static PyObject *GpuMat_get_itemsize(PyObject *op, void *Py_UNUSED(closure))
{
    return PyLong_FromLong(fm_dtype_size(((fm_GpuMat *)op)->shape.type_num));
}

static PyObject *GpuMat_get_nbytes(PyObject *op, void *Py_UNUSED(closure))
{
    fm_GpuMat *m = (fm_GpuMat *)op;
    return PyLong_FromSize_t(fm_image_row_bytes(&m->shape) * (size_t)m->shape.height);
}

static PyObject *GpuMat_get_ptr(PyObject *op, void *Py_UNUSED(closure))
{
    fm_GpuMat *m = open_self(op);
    return m ? PyLong_FromSize_t((size_t)(uintptr_t)m->data) : NULL;
}

static PyObject *GpuMat_get_closed(PyObject *op, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(((fm_GpuMat *)op)->closed);
}

static PyObject *GpuMat_get_readonly(PyObject *op, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(((fm_GpuMat *)op)->shape.readonly);
}

static PyObject *GpuMat_get_is_continuous(PyObject *op, void *Py_UNUSED(closure))
{
    fm_GpuMat *m = (fm_GpuMat *)op;
    return PyBool_FromLong(m->shape.height == 1 || m->pitch == fm_image_row_bytes(&m->shape));
}

static PyObject *GpuMat_repr(PyObject *op)
{
    fm_GpuMat *m = (fm_GpuMat *)op;
    if (m->closed)
        return PyUnicode_FromString("<fastmog.GpuMat closed>");
    return PyUnicode_FromFormat("<fastmog.GpuMat %dx%dx%d %s device=%d pitch=%zu%s>",
                                m->shape.height, m->shape.width, m->shape.channels, fm_dtype_name(m->shape.type_num),
                                m->device, m->pitch, m->shape.readonly ? " read-only" : "");
}

static PyObject *GpuMat_repr_html(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    fm_GpuMat *m = (fm_GpuMat *)op;
    if (m->closed)
        return PyUnicode_FromString("<code>fastmog.GpuMat</code> (closed)");
    return PyUnicode_FromFormat(
        "<table><caption><code>fastmog.GpuMat</code></caption>"
        "<tr><th>shape</th><td>%d &times; %d &times; %d</td></tr>"
        "<tr><th>dtype</th><td>%s</td></tr>"
        "<tr><th>device</th><td>%d</td></tr>"
        "<tr><th>pitch</th><td>%zu bytes</td></tr></table>",
        m->shape.height, m->shape.width, m->shape.channels, fm_dtype_name(m->shape.type_num), m->device, m->pitch);
}

static PyMethodDef GpuMat_methods[] = {
    {"from_array", (PyCFunction)(void (*)(void))GpuMat_from_array,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS, FM_DOC_GPUMAT_FROM_ARRAY},
    {"upload", (PyCFunction)(void (*)(void))GpuMat_upload,
     METH_VARARGS | METH_KEYWORDS, FM_DOC_GPUMAT_UPLOAD},
    {"download", (PyCFunction)(void (*)(void))GpuMat_download,
     METH_VARARGS | METH_KEYWORDS, FM_DOC_GPUMAT_DOWNLOAD},
    {"copy_to", (PyCFunction)(void (*)(void))GpuMat_copy_to,
     METH_VARARGS | METH_KEYWORDS, FM_DOC_GPUMAT_COPY_TO},
    {"fill", (PyCFunction)(void (*)(void))GpuMat_fill,
     METH_VARARGS | METH_KEYWORDS, FM_DOC_GPUMAT_FILL},
    {"roi", GpuMat_roi, METH_VARARGS, FM_DOC_GPUMAT_ROI},
    {"close", GpuMat_close, METH_NOARGS, FM_DOC_GPUMAT_CLOSE},
    {"__enter__", GpuMat_enter, METH_NOARGS, NULL},
    {"__exit__", GpuMat_exit, METH_VARARGS, NULL},
    {"__dlpack__", (PyCFunction)(void (*)(void))fm_gpumat_dlpack,
     METH_VARARGS | METH_KEYWORDS,
     "__dlpack__($self, /, *, stream=None, max_version=None, dl_device=None, copy=None)\n--\n\n"
     "DLPack export, zero-copy. The consumer's `stream` is made to wait (on the\n"
     "GPU) for the work queued on this image; the host never waits. `stream` is\n"
     "a raw handle (1: legacy default, 2: per-thread default, -1: no ordering)\n"
     "and is trusted as it is, as CuPy does: no CUDA API can validate one."},
    {"__dlpack_device__", fm_gpumat_dlpack_device, METH_NOARGS,
     "__dlpack_device__($self, /)\n--\n\n(kDLCUDA, device)."},
    {"_repr_html_", GpuMat_repr_html, METH_NOARGS, FM_DOC_GPUMAT_REPR_HTML},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef GpuMat_members[] = {
    {"height", T_INT, offsetof(fm_GpuMat, shape.height), READONLY, "Rows."},
    {"width", T_INT, offsetof(fm_GpuMat, shape.width), READONLY, "Pixels per row."},
    {"channels", T_INT, offsetof(fm_GpuMat, shape.channels), READONLY, "Values per pixel: 1, 3 or 4."},
    {"ndim", T_INT, offsetof(fm_GpuMat, shape.ndim), READONLY, "2 for H x W, 3 for H x W x C."},
    {"pitch", T_PYSSIZET, offsetof(fm_GpuMat, pitch), READONLY, "Bytes between row starts."},
    {"device", T_INT, offsetof(fm_GpuMat, device), READONLY, "CUDA device of the memory."},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef GpuMat_getset[] = {
    {"shape", GpuMat_get_shape, NULL, "(height, width) or (height, width, channels).", NULL},
    {"dtype", GpuMat_get_dtype, NULL, "numpy dtype of the values.", NULL},
    {"itemsize", GpuMat_get_itemsize, NULL, "Bytes per value.", NULL},
    {"nbytes", GpuMat_get_nbytes, NULL, "Bytes of pixel data (rows without padding).", NULL},
    {"ptr", GpuMat_get_ptr, NULL, "Device address of the first pixel.", NULL},
    {"closed", GpuMat_get_closed, NULL, "True once close() has run.", NULL},
    {"readonly", GpuMat_get_readonly, NULL, "True for a read-only view of foreign memory.", NULL},
    {"is_continuous", GpuMat_get_is_continuous, NULL, "True if rows have no padding.", NULL},
    {"__cuda_array_interface__", fm_gpumat_cuda_array_interface, NULL,
     "CUDA Array Interface, version 3 (zero-copy).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot GpuMat_slots[] = {
    {Py_tp_new, GpuMat_new},
    {Py_tp_dealloc, GpuMat_dealloc},
    {Py_tp_traverse, GpuMat_traverse},
    {Py_tp_clear, GpuMat_clear},
    {Py_tp_repr, GpuMat_repr},
    {Py_tp_methods, GpuMat_methods},
    {Py_tp_members, GpuMat_members},
    {Py_tp_getset, GpuMat_getset},
    {Py_mp_subscript, GpuMat_subscript},
    {Py_tp_doc, (void *)FM_DOC_GPUMAT},
    {0, NULL},
};

PyType_Spec fm_gpumat_spec = {
    .name = "fastmog.GpuMat",
    .basicsize = sizeof(fm_GpuMat),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = GpuMat_slots,
};
