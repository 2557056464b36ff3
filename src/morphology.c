/* fastmog._morphology: erosion, dilation, opening and closing of a uint8
 * mask on the GPU, the passes cuda/morphology.cu makes, bit for bit
 * fastmog.cpu.morphology's and cv2.morphologyEx's. The Python face,
 * fastmog.morphology, checks op, kernel and iterations and draws the
 * element; this file takes the element as an array. */
#include "fastmog.h"
#include "docstrings.h"
#include "morphology_launch.h"

/* What fastmog.motion's op codes ask for, pass by pass: opening erodes
 * `iterations` times then dilates as many times; closing the other way. */
enum { OP_ERODE = 0, OP_DILATE = 1, OP_OPEN = 2, OP_CLOSE = 3 };
#define MAX_ITERATIONS 1000     /* fastmog.motion._element's bound, held here too */

static int pass_dilates(int op, int iterations, int k)
{
    switch (op) {
    case OP_ERODE:
        return 0;
    case OP_DILATE:
        return 1;
    case OP_OPEN:
        return k >= iterations;
    default:
        return k < iterations;
    }
}

/* The element (kh x kw uint8, C-contiguous, nonzero = in) as runs about its
 * anchor (kw / 2, kh / 2). ValueError for what the launcher cannot take. */
static int element_runs(PyObject *arg, fm_morph_element *e)
{
    if (!PyArray_Check(arg) || PyArray_TYPE((PyArrayObject *)arg) != NPY_UINT8
        || PyArray_NDIM((PyArrayObject *)arg) != 2
        || !PyArray_IS_C_CONTIGUOUS((PyArrayObject *)arg)) {
        PyErr_SetString(PyExc_TypeError, "element must be a 2-D C-contiguous uint8 array");
        return -1;
    }
    PyArrayObject *a = (PyArrayObject *)arg;
    const npy_intp kh = PyArray_DIM(a, 0), kw = PyArray_DIM(a, 1);
    if (kh < 1 || kw < 1 || kh > FM_MORPH_MAX_SIDE || kw > FM_MORPH_MAX_SIDE) {
        PyErr_Format(PyExc_ValueError, "the element is %zdx%zd: its sides must be from 1 to %d",
                     (Py_ssize_t)kw, (Py_ssize_t)kh, FM_MORPH_MAX_SIDE);
        return -1;
    }
    const unsigned char *v = PyArray_DATA(a);
    const int ax = (int)kw / 2, ay = (int)kh / 2;
    e->n_runs = 0;
    for (int j = 0; j < kh; ++j) {
        for (int i = 0; i < kw;) {
            if (!v[j * kw + i]) {
                ++i;
                continue;
            }
            int start = i;
            while (i < kw && v[j * kw + i])
                ++i;
            e->dy[e->n_runs] = (signed char)(j - ay);
            e->dx[e->n_runs] = (signed char)(start - ax);
            e->len[e->n_runs] = (signed char)(i - start);
            ++e->n_runs;
        }
    }
    if (e->n_runs == 0) {
        PyErr_SetString(PyExc_ValueError, "the element has no nonzero entry: it reaches no "
                        "pixel");
        return -1;
    }
    return 0;
}

static int overlap(const fm_image *a, const fm_image *b)
{
    const char *a0 = a->data, *b0 = b->data;
    const char *a1 = a0 + a->pitch * (size_t)(a->height - 1) + (size_t)a->width;
    const char *b1 = b0 + b->pitch * (size_t)(b->height - 1) + (size_t)b->width;
    return a0 < b1 && b0 < a1;
}

/* The launches an op takes: an opening or closing once, with an element of
 * up to 5x5, is one launch of both passes (the detector's default, open 3x3:
 * the mask is read and written once, not twice). */
static int launches(int op, int iterations, const fm_morph_element *e)
{
    if (op >= OP_OPEN && iterations == 1 && fm_morphology_pair_fits(e))
        return 1;
    return op <= OP_DILATE ? iterations : 2 * iterations;
}

/* The passes over `count` images, src[k] to last[k] through scratch[k]
 * (unused with one launch): pass k writes `last` when an even number of
 * passes follow it and `scratch` otherwise, so that no pass writes what it
 * reads. `call` hears when the first pass is submitted. */
static cudaError_t queue_passes(const fm_image *src, const fm_image *last,
                                const fm_image *scratch, int count, const fm_morph_element *e,
                                int op, int iterations, int binarize, cudaStream_t stream,
                                fm_call *call)
{
    if (launches(op, iterations, e) == 1 && op >= OP_OPEN) {
        cudaError_t err = fm_launch_morphology_pair(src, last, count, e, op == OP_CLOSE,
                                                    binarize, binarize >= 0, stream);
        fm_call_gpu_submitted(call);
        return err;
    }
    const int passes = op <= OP_DILATE ? iterations : 2 * iterations;
    const fm_image *from = src;
    for (int k = 0; k < passes; ++k) {
        const fm_image *to = (passes - 1 - k) % 2 == 0 ? last : scratch;
        /* after a binarizing first pass, every pass reads only 0 and 255 */
        cudaError_t err = fm_launch_morphology(from, to, count, e,
                                               pass_dilates(op, iterations, k),
                                               k == 0 ? binarize : -1, binarize >= 0, stream);
        fm_call_gpu_submitted(call);
        if (err != cudaSuccess)
            return err;
        from = to;
    }
    return cudaSuccess;
}

/* Checks what both entries share: foreground, op and iterations. */
static int check_op(int op, int iterations, int binarize)
{
    if (binarize < -1 || binarize > 255) {
        PyErr_Format(PyExc_ValueError, "foreground must be 0 to 255 (or -1: none), not %d",
                     binarize);
        return -1;
    }
    if (op < OP_ERODE || op > OP_CLOSE || iterations < 1 || iterations > MAX_ITERATIONS) {
        PyErr_Format(PyExc_ValueError, "op must be 0 to 3 and iterations from 1 to %d",
                     MAX_ITERATIONS);
        return -1;
    }
    return 0;
}

static PyObject *morphology(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"", "", "", "", "stream", "out", "foreground", "timer", NULL};
    static const fm_image_rule mask_rule = {FM_DTYPE_BIT(NPY_UINT8), FM_CHANNELS_BIT(1)};
    fm_state *st = fm_state_of_module(module);
    PyObject *mask_arg, *element_arg, *stream_arg = NULL, *out_arg = Py_None, *timer = NULL;
    int op, iterations, binarize = -1;
    fm_GpuMat *mask = NULL, *out = NULL, *scratch = NULL, *result = NULL;
    fm_morph_element element;
    fm_device_guard guard;
    fm_call call;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOii|$OOiO:_morphology", kwlist, &mask_arg,
                                     &element_arg, &op, &iterations, &stream_arg, &out_arg,
                                     &binarize, &timer))
        return NULL;
    if (check_op(op, iterations, binarize) < 0)
        return NULL;
    fm_host_image host;
    if (element_runs(element_arg, &element) < 0
        || (PyArray_Check(mask_arg) && fm_host_image_check(mask_arg, "mask", &mask_rule,
                                                           &host) < 0))
        return NULL;
    fm_Stream *stream = fm_require_stream(st, stream_arg, -1);
    /* Held through the call: a producer's code may release the GIL. */
    if (stream == NULL || fm_stream_hold(stream) < 0)
        return NULL;
    int h = 0, w = 0, c = 0;
    fm_peek_shape(st, mask_arg, &h, &w, &c);
    if (fm_call_begin(st, &call, "morphology", "kernel morphology", timer, stream, h, w, 1) < 0) {
        fm_stream_unhold(stream);
        return NULL;
    }
    if (fm_device_enter(st, stream->device, &guard) < 0) {
        PyObject *none = fm_call_end(st, &call, NULL);
        fm_stream_unhold(stream);
        return none;
    }
    if (fm_call_gpu_queue(st, &call) < 0
        || (mask = fm_as_device_image(st, mask_arg, "mask", &mask_rule, stream, NULL,
                                      timer)) == NULL)
        goto done;
    fm_image_shape shape = {mask->shape.height, mask->shape.width, 1, 2, NPY_UINT8, 0};
    fm_image_rule out_rule = {FM_DTYPE_BIT(NPY_UINT8), FM_CHANNELS_BIT(1), shape.height,
                              shape.width, "the mask", 1};
    if ((out = fm_gpumat_out(st, out_arg, &out_rule, stream->device, &shape)) == NULL)
        goto done;
    fm_image mi = fm_gpumat_image(mask), oi = fm_gpumat_image(out);
    const int in_place = overlap(&mi, &oi);
    const int passes = launches(op, iterations, &element);
    /* from fastmog's pool: a call's scratch comes back to it afterwards */
    if ((passes > 1 && (scratch = fm_gpumat_new(st, stream->device, &shape)) == NULL)
        || (in_place && (result = fm_gpumat_new(st, stream->device, &shape)) == NULL))
        goto done;
    fm_image si = scratch != NULL ? fm_gpumat_image(scratch) : oi;
    fm_image ri = result != NULL ? fm_gpumat_image(result) : oi;
    if (fm_device_buffer_use(st, mask->buffer, stream, FM_USE_AFTER_EARLIER) < 0
        || fm_device_buffer_use(st, out->buffer, stream, FM_USE_AFTER_EARLIER) < 0
        || (scratch != NULL
            && fm_device_buffer_use(st, scratch->buffer, stream, FM_USE_RELEASE_AFTER) < 0)
        || (result != NULL
            && fm_device_buffer_use(st, result->buffer, stream, FM_USE_RELEASE_AFTER) < 0)
        || fm_call_gpu_begin(st, &call) < 0)
        goto done;
    /* where the input is the output, the last pass writes `result`, then
     * the copy */
    cudaError_t err = queue_passes(&mi, in_place ? &ri : &oi, &si, 1, &element, op, iterations,
                                   binarize, stream->handle, &call);
    if (err == cudaSuccess && in_place)
        err = cudaMemcpy2DAsync(oi.data, oi.pitch, ri.data, ri.pitch, (size_t)oi.width,
                                (size_t)oi.height, cudaMemcpyDeviceToDevice, stream->handle);
    if (err != cudaSuccess) {
        fm_cuda_error(st, err, "a morphology pass on a %dx%d mask", shape.height, shape.width);
        goto done;
    }
    (void)fm_call_gpu_end(st, &call);
    const int64_t bytes = (int64_t)passes * shape.width * shape.height;
    fm_call_bytes(&call, bytes, bytes);
done:
    fm_device_exit(&guard);
    Py_XDECREF(mask);
    Py_XDECREF(scratch);
    Py_XDECREF(result);
    if (PyErr_Occurred())
        Py_CLEAR(out);
    PyObject *r = fm_call_end(st, &call, (PyObject *)out);
    fm_stream_unhold(stream);
    return r;
}

/* fastmog._morphology_images(masks, element, op, iterations, *, stream,
 * out=None, foreground=-1, timer=None): the same passes over n masks of one
 * shape (GpuMats, as apply_cameras gives them) in one launch each, into a
 * stack: image k fills rows [k H, (k + 1) H) of `out`, an (n H) x W uint8
 * GpuMat that overlaps no mask. Everything is checked before anything is
 * queued. */
static PyObject *morphology_images(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"", "", "", "", "stream", "out", "foreground", "timer", NULL};
    fm_state *st = fm_state_of_module(module);
    PyObject *masks_arg, *element_arg, *stream_arg = NULL, *out_arg = Py_None, *timer = NULL;
    PyObject *masks = NULL;
    int op, iterations, binarize = -1, call_begun = 0;
    fm_GpuMat *out = NULL, *scratch = NULL;
    fm_image *views = NULL;         /* [0, n) masks, [n, 2n) out, [2n, 3n) scratch */
    fm_Stream *stream = NULL;
    fm_morph_element element;
    fm_device_guard guard;
    fm_call call;
    PyObject *r = NULL;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOii|$OOiO:_morphology_images", kwlist,
                                     &masks_arg, &element_arg, &op, &iterations, &stream_arg,
                                     &out_arg, &binarize, &timer)
        || check_op(op, iterations, binarize) < 0 || element_runs(element_arg, &element) < 0
        || (masks = PySequence_Fast(masks_arg, "masks must be a sequence of GpuMats")) == NULL)
        return NULL;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(masks);
    if (n < 1 || n > INT_MAX / 3) {
        PyErr_SetString(PyExc_ValueError, "masks must hold at least one mask");
        goto out;
    }
    if ((stream = fm_require_stream(st, stream_arg, -1)) == NULL || fm_stream_hold(stream) < 0) {
        stream = NULL;
        goto out;
    }
    fm_image_shape one = {0};
    for (Py_ssize_t k = 0; k < n; ++k) {
        char name[32];
        PyOS_snprintf(name, sizeof name, "masks[%zd]", k);
        fm_GpuMat *m = fm_gpumat_check_open(st, PySequence_Fast_GET_ITEM(masks, k), name);
        if (m == NULL || fm_check_same_device(m, stream->device, name) < 0)
            goto out;
        if (m->shape.type_num != NPY_UINT8 || m->shape.channels != 1) {
            PyErr_Format(PyExc_TypeError, "%s must be a one-channel uint8 GpuMat", name);
            goto out;
        }
        if (k == 0)
            one = m->shape;
        else if (m->shape.height != one.height || m->shape.width != one.width) {
            PyErr_Format(PyExc_ValueError, "%s is %dx%d, masks[0] %dx%d: one shape for all",
                         name, m->shape.width, m->shape.height, one.width, one.height);
            goto out;
        }
    }
    if ((int64_t)one.height * n > INT_MAX) {
        PyErr_Format(PyExc_ValueError, "%zd masks of %d rows are too many rows for one stack",
                     n, one.height);
        goto out;
    }
    fm_image_shape shape = {(int)(one.height * n), one.width, 1, 2, NPY_UINT8, 0};
    fm_image_rule out_rule = {FM_DTYPE_BIT(NPY_UINT8), FM_CHANNELS_BIT(1), shape.height,
                              shape.width, "the stack of masks", 1};
    if (fm_call_begin(st, &call, "morphology", "kernel morphology", timer, stream, shape.height,
                      shape.width, 1) < 0)
        goto out;
    call_begun = 1;
    if (fm_device_enter(st, stream->device, &guard) < 0)
        goto out;
    const int count = (int)n, passes = launches(op, iterations, &element);
    if ((out = fm_gpumat_out(st, out_arg, &out_rule, stream->device, &shape)) == NULL
        || (views = PyMem_Calloc(3 * (size_t)count, sizeof *views)) == NULL
        || (passes > 1 && (scratch = fm_gpumat_new(st, stream->device, &shape)) == NULL)) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        goto leave;
    }
    fm_image oi = fm_gpumat_image(out), si = scratch != NULL ? fm_gpumat_image(scratch) : oi;
    for (int k = 0; k < count; ++k) {
        views[k] = fm_gpumat_image((fm_GpuMat *)PySequence_Fast_GET_ITEM(masks, k));
        views[count + k] = oi;
        views[count + k].data = (char *)oi.data + (size_t)k * one.height * oi.pitch;
        views[count + k].height = one.height;
        views[2 * count + k] = si;
        views[2 * count + k].data = (char *)si.data + (size_t)k * one.height * si.pitch;
        views[2 * count + k].height = one.height;
        if (overlap(&views[k], &oi)) {
            PyErr_Format(PyExc_ValueError, "out overlaps masks[%d]: the stack must be memory "
                         "of its own", k);
            goto leave;
        }
    }
    for (int k = 0; k < count; ++k)
        if (fm_device_buffer_use(st, ((fm_GpuMat *)PySequence_Fast_GET_ITEM(masks, k))->buffer,
                                 stream, FM_USE_AFTER_EARLIER) < 0)
            goto leave;
    if (fm_device_buffer_use(st, out->buffer, stream, FM_USE_AFTER_EARLIER) < 0
        || (scratch != NULL
            && fm_device_buffer_use(st, scratch->buffer, stream, FM_USE_RELEASE_AFTER) < 0)
        || fm_call_gpu_queue(st, &call) < 0 || fm_call_gpu_begin(st, &call) < 0)
        goto leave;
    cudaError_t err = queue_passes(views, views + count, views + 2 * count, count, &element, op,
                                   iterations, binarize, stream->handle, &call);
    if (err != cudaSuccess) {
        fm_cuda_error(st, err, "a morphology pass on %d masks of %dx%d", count, one.height,
                      one.width);
        goto leave;
    }
    (void)fm_call_gpu_end(st, &call);
    const int64_t bytes = (int64_t)passes * shape.width * shape.height;
    fm_call_bytes(&call, bytes, bytes);
    r = (PyObject *)out;
    out = NULL;
leave:
    fm_device_exit(&guard);
out:
    PyMem_Free(views);
    Py_XDECREF(scratch);
    Py_XDECREF(out);
    Py_XDECREF(masks);
    if (call_begun)
        r = fm_call_end(st, &call, r);
    if (stream != NULL)
        fm_stream_unhold(stream);
    return r;
}

PyMethodDef fm_morphology_methods[] = {
    {"_morphology", (PyCFunction)(void (*)(void))morphology, METH_VARARGS | METH_KEYWORDS,
     FM_DOC_MORPHOLOGY},
    {"_morphology_images", (PyCFunction)(void (*)(void))morphology_images,
     METH_VARARGS | METH_KEYWORDS, FM_DOC_MORPHOLOGY_IMAGES},
    {NULL, NULL, 0, NULL},
};
