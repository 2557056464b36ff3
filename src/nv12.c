/* fastmog.nv12_to_bgr and nv21_to_bgr: a decoder's NV12 (or NV21) frame to
 * BGR on the GPU, equal bit for bit to cv2.cvtColor; planes come through the
 * front door, so any producer's device memory (PyNvVideoCodec planes, CuPy,
 * PyTorch) is read where it lies. */
#include "fastmog.h"
#include "docstrings.h"
#include "nv12_launch.h"

/* The planes, up to the tallest frame the launcher's grid covers; a single
 * frame (no uv) holds its chroma rows below the luma rows. */
static const fm_image_rule luma_rule = {FM_DTYPE_BIT(NPY_UINT8), FM_CHANNELS_BIT(1),
                                        .max_height = FM_NV12_MAX_HEIGHT};
static const fm_image_rule frame_rule = {FM_DTYPE_BIT(NPY_UINT8), FM_CHANNELS_BIT(1),
                                         .max_height = FM_NV12_MAX_HEIGHT / 2 * 3};
static const fm_image_rule chroma_rule = {FM_DTYPE_BIT(NPY_UINT8),
                                          FM_CHANNELS_BIT(1) | FM_CHANNELS_BIT(2),
                                          .max_height = FM_NV12_MAX_HEIGHT / 2};

/* A plane as the launcher takes it; `pairs` says the values go in U, V pairs. */
static fm_image plane_image(const fm_GpuMat *m, char *data, int height, int pairs)
{
    fm_image img = fm_gpumat_image(m);
    img.data = data;
    img.height = height;
    if (pairs && img.channels == 1) {  /* (H/2, W) interleaved: W/2 pairs */
        img.width /= 2;
        img.channels = 2;
    }
    return img;
}

static int overlaps(const fm_image *a, const fm_image *b)
{
    const char *a0 = a->data, *b0 = b->data;
    const char *a1 = a0 + a->pitch * (size_t)(a->height - 1) + (size_t)a->width * a->channels;
    const char *b1 = b0 + b->pitch * (size_t)(b->height - 1) + (size_t)b->width * b->channels;
    return a0 < b1 && b0 < a1;
}

/* Checks the planes against each other: even sizes, chroma half of luma. */
static int check_planes(const fm_image *y, const fm_image *uv)
{
    if (y->width % 2 != 0 || y->height % 2 != 0) {
        PyErr_Format(PyExc_ValueError, "y is %dx%d: NV12 needs an even width and height",
                     y->height, y->width);
        return -1;
    }
    if (uv->width != y->width / 2 || uv->height != y->height / 2 || uv->channels != 2) {
        PyErr_Format(PyExc_ValueError,
                     "uv must be (%d, %d, 2) or (%d, %d) for a %dx%d y plane",
                     y->height / 2, y->width / 2, y->height / 2, y->width, y->height, y->width);
        return -1;
    }
    return 0;
}

static PyObject *convert(PyObject *module, PyObject *args, PyObject *kwargs, const char *fname,
                         int flags)
{
    static char *kwlist[] = {"", "", "stream", "out", "rgb", "matrix", "timer", NULL};
    fm_state *st = fm_state_of_module(module);
    PyObject *y_arg, *uv_arg = Py_None, *stream_arg = NULL, *out_arg = Py_None, *timer = NULL;
    const char *matrix_name = "bt601";
    int rgb = 0;
    fm_GpuMat *y = NULL, *uv = NULL, *out = NULL;
    fm_device_guard guard;
    fm_call call;
    char format[64];

    snprintf(format, sizeof format, "O|O$OOpsO:%s", fname);
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, format, kwlist, &y_arg, &uv_arg,
                                     &stream_arg, &out_arg, &rgb, &matrix_name, &timer))
        return NULL;
    int matrix = fm_yuv_matrix_id(matrix_name);
    if (matrix < 0) {
        PyErr_Format(PyExc_ValueError, "matrix must be one of %s, not '%s'",
                     FM_YUV_MATRIX_NAMES, matrix_name);
        return NULL;
    }
    /* Host planes are checked before anything else, the device included:
     * nothing is queued for a frame the launcher would refuse. */
    const fm_image_rule *y_rule = uv_arg == Py_None ? &frame_rule : &luma_rule;
    fm_host_image host;
    if ((PyArray_Check(y_arg) && fm_host_image_check(y_arg, "y", y_rule, &host) < 0)
        || (PyArray_Check(uv_arg) && fm_host_image_check(uv_arg, "uv", &chroma_rule, &host) < 0))
        return NULL;
    fm_Stream *stream = fm_require_stream(st, stream_arg, -1);
    /* Held through the call: a producer's code may release the GIL. */
    if (stream == NULL || fm_stream_hold(stream) < 0)
        return NULL;
    if (fm_call_begin(st, &call, fname, "kernel nv12_to_bgr", timer, stream, -1, 0, 0) < 0) {
        fm_stream_unhold(stream);
        return NULL;
    }
    if (fm_device_enter(st, stream->device, &guard) < 0) {
        PyObject *none = fm_call_end(st, &call, NULL);
        fm_stream_unhold(stream);
        return none;
    }
    if (fm_call_gpu_queue(st, &call) < 0
        || (y = fm_as_device_image(st, y_arg, "y", y_rule, stream, NULL, timer)) == NULL)
        goto done;
    fm_image yi, uvi;
    if (uv_arg == Py_None) {
        /* One (H*3/2) x W frame, as cv2 takes it: luma rows, then chroma rows. */
        if (y->shape.height % 3 != 0) {
            PyErr_Format(PyExc_ValueError,
                         "y has %d rows: a single NV12 frame has H*3/2 rows (pass uv= for "
                         "separate planes)", y->shape.height);
            goto done;
        }
        int h = y->shape.height / 3 * 2;
        yi = plane_image(y, y->data, h, 0);
        uvi = plane_image(y, y->data + (size_t)h * y->pitch, h / 2, 1);
    }
    else {
        if ((uv = fm_as_device_image(st, uv_arg, "uv", &chroma_rule, stream, NULL, timer)) == NULL)
            goto done;
        yi = plane_image(y, y->data, y->shape.height, 0);
        uvi = plane_image(uv, uv->data, uv->shape.height, 1);
    }
    if (check_planes(&yi, &uvi) < 0)
        goto done;
    fm_image_shape bgr = {yi.height, yi.width, 3, 3, NPY_UINT8, 0};
    fm_image_rule out_rule = {FM_DTYPE_BIT(NPY_UINT8), FM_CHANNELS_BIT(3), yi.height,
                              yi.width, "the frame", 1};
    if ((out = fm_gpumat_out(st, out_arg, &out_rule, stream->device, &bgr)) == NULL)
        goto done;
    fm_image oi = fm_gpumat_image(out);
    if (overlaps(&oi, &yi) || overlaps(&oi, &uvi)) {
        PyErr_SetString(PyExc_ValueError, "out overlaps the y or uv plane");
        goto done;
    }
    if (fm_device_buffer_use(st, y->buffer, stream, FM_USE_RELEASE_AFTER) < 0
        || (uv != NULL && fm_device_buffer_use(st, uv->buffer, stream, FM_USE_RELEASE_AFTER) < 0)
        || fm_device_buffer_use(st, out->buffer, stream, FM_USE_RELEASE_AFTER) < 0
        || fm_call_gpu_begin(st, &call) < 0)
        goto done;
    cudaError_t err = fm_launch_nv12_to_bgr(yi, uvi, oi, matrix,
                                            flags | (rgb ? FM_YUV_RGB : 0), stream->handle);
    if (err != cudaSuccess) {
        fm_cuda_error(st, err, "converting a %dx%d NV12 frame", yi.height, yi.width);
        goto done;
    }
    (void)fm_call_gpu_end(st, &call);
    fm_call_bytes(&call, (int64_t)yi.width * yi.height * 3 / 2, (int64_t)yi.width * yi.height * 3);
done:
    fm_device_exit(&guard);
    Py_XDECREF(y);
    Py_XDECREF(uv);
    if (PyErr_Occurred())
        Py_CLEAR(out);
    PyObject *result = fm_call_end(st, &call, (PyObject *)out);
    fm_stream_unhold(stream);
    return result;
}

static PyObject *nv12_to_bgr(PyObject *module, PyObject *args, PyObject *kwargs)
{
    return convert(module, args, kwargs, "nv12_to_bgr", 0);
}

static PyObject *nv21_to_bgr(PyObject *module, PyObject *args, PyObject *kwargs)
{
    return convert(module, args, kwargs, "nv21_to_bgr", FM_YUV_NV21);
}

PyMethodDef fm_nv12_methods[] = {
    {"nv12_to_bgr", (PyCFunction)(void (*)(void))nv12_to_bgr, METH_VARARGS | METH_KEYWORDS,
     FM_DOC_NV12_TO_BGR},
    {"nv21_to_bgr", (PyCFunction)(void (*)(void))nv21_to_bgr, METH_VARARGS | METH_KEYWORDS,
     FM_DOC_NV21_TO_BGR},
    {NULL, NULL, 0, NULL},
};
