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

/* The passes, src to dst through `scratch` (and `result` where dst overlaps
 * src: the last pass writes it, then it is copied). Images are on `stream`;
 * `call` hears when the first pass is submitted. */
static cudaError_t queue_passes(fm_image src, fm_image dst, fm_image scratch, fm_image result,
                                int in_place, const fm_morph_element *e, int op,
                                int iterations, int binarize, cudaStream_t stream,
                                fm_call *call)
{
    const int passes = op <= OP_DILATE ? iterations : 2 * iterations;
    const fm_image last = in_place ? result : dst;
    fm_image from = src;
    for (int k = 0; k < passes; ++k) {
        /* the last pass writes `last`; before it they alternate so that pass
         * k never writes what it reads */
        fm_image to = (passes - 1 - k) % 2 == 0 ? last : scratch;
        cudaError_t err = fm_launch_morphology(from, to, e, pass_dilates(op, iterations, k),
                                               k == 0 ? binarize : -1, stream);
        fm_call_gpu_submitted(call);
        if (err != cudaSuccess)
            return err;
        from = to;
    }
    if (!in_place)
        return cudaSuccess;
    return cudaMemcpy2DAsync(dst.data, dst.pitch, result.data, result.pitch,
                             (size_t)dst.width, (size_t)dst.height, cudaMemcpyDeviceToDevice,
                             stream);
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
    if (binarize < -1 || binarize > 255) {
        PyErr_Format(PyExc_ValueError, "foreground must be 0 to 255 (or -1: none), not %d",
                     binarize);
        return NULL;
    }
    if (op < OP_ERODE || op > OP_CLOSE || iterations < 1 || iterations > MAX_ITERATIONS) {
        PyErr_Format(PyExc_ValueError, "op must be 0 to 3 and iterations from 1 to %d",
                     MAX_ITERATIONS);
        return NULL;
    }
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
    const int passes = op <= OP_DILATE ? iterations : 2 * iterations;
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
    cudaError_t err = queue_passes(mi, oi, si, ri, in_place, &element, op, iterations,
                                   binarize, stream->handle, &call);
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

PyMethodDef fm_morphology_methods[] = {
    {"_morphology", (PyCFunction)(void (*)(void))morphology, METH_VARARGS | METH_KEYWORDS,
     FM_DOC_MORPHOLOGY},
    {NULL, NULL, 0, NULL},
};
