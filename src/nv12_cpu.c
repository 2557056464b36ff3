/* _fastmog._cpu_nv12_to_bgr and _cpu_nv21_to_bgr: the host NV12/NV21 -> BGR
 * conversion (src/nv12_loop.c) for numpy arrays, exported as the method table
 * fm_nv12_cpu_methods. Every argument is checked before anything is
 * allocated or written. */
#include "fastmog.h"
#include "docstrings.h"
#include "nv12_loop.h"

#include <stdio.h>
#include <string.h>

/* Largest side accepted: keeps width * 3 and every row offset far inside int
 * and size_t, whatever the platform. */
#define FM_NV12_MAX_SIDE (1 << 28)

/* One plane as the C loop wants it: first byte and row pitch. */
typedef struct fm_plane {
    unsigned char *data;
    size_t pitch;
} fm_plane;

/* "(480, 640, 3)" for error messages. */
static const char *shape_str(PyArrayObject *a, char *buf, size_t size)
{
    int nd = PyArray_NDIM(a);
    size_t n = (size_t)snprintf(buf, size, "(");
    for (int i = 0; i < nd && n < size; i++)
        n += (size_t)snprintf(buf + n, size - n, "%s%lld", i ? ", " : "",
                              (long long)PyArray_DIM(a, i));
    if (n < size)
        snprintf(buf + n, size - n, nd == 1 ? ",)" : ")");
    return buf;
}

/* Borrowed `obj` as a uint8 ndarray, or NULL with TypeError. */
static PyArrayObject *as_u8_array(PyObject *obj, const char *argname)
{
    if (!PyArray_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be a numpy array, not %.200s", argname,
                     Py_TYPE(obj)->tp_name);
        return NULL;
    }
    PyArrayObject *a = (PyArrayObject *)obj;
    if (PyArray_TYPE(a) != NPY_UINT8) {
        PyErr_Format(PyExc_TypeError, "%s must be uint8, not %R", argname,
                     (PyObject *)PyArray_DESCR(a));
        return NULL;
    }
    return a;
}

/* Checks the row layout as every host image is checked (fm_host_image_check:
 * pixels contiguous within a row, rows in order and not overlapping) and
 * fills `plane`. */
static int check_rows(PyArrayObject *a, const char *argname, fm_plane *plane)
{
    fm_host_image img;
    if (fm_host_image_check((PyObject *)a, argname, NULL, &img) < 0)
        return -1;
    plane->data = (unsigned char *)img.data;
    plane->pitch = img.pitch;
    return 0;
}

/* Whether the bytes of two planes (rows x row_bytes each) intersect. */
static int spans_overlap(const fm_plane *a, npy_intp a_rows, npy_intp a_row_bytes,
                         const fm_plane *b, npy_intp b_rows, npy_intp b_row_bytes)
{
    uintptr_t a0 = (uintptr_t)a->data, b0 = (uintptr_t)b->data;
    uintptr_t a1 = a0 + (size_t)(a_rows - 1) * a->pitch + (size_t)a_row_bytes;
    uintptr_t b1 = b0 + (size_t)(b_rows - 1) * b->pitch + (size_t)b_row_bytes;
    return a0 < b1 && b0 < a1;
}

// Returns a new reference: `out_arg`, or a new H x W x 3 uint8 array.
static PyObject *nv12_to_bgr_impl(PyObject *y_arg, PyObject *uv_arg, PyObject *out_arg,
                                  int rgb, int matrix, int nv21)
{
    const char *fmt = nv21 ? "NV21" : "NV12";
    char shape[96];
    fm_plane y, uv, out;
    npy_intp height, width;
    PyArrayObject *ya, *uva = NULL, *outa = NULL;
    PyObject *result = NULL;

    /* -- y -- */
    if ((ya = as_u8_array(y_arg, "y")) == NULL)
        return NULL;
    if (!(PyArray_NDIM(ya) == 2 || (PyArray_NDIM(ya) == 3 && PyArray_DIM(ya, 2) == 1))) {
        PyErr_Format(PyExc_ValueError, "y must be 2-D (or H x W x 1), got shape %s",
                     shape_str(ya, shape, sizeof shape));
        return NULL;
    }
    if (uv_arg == Py_None && PyArray_DIM(ya, 0) % 3 != 0) {
        PyErr_Format(PyExc_ValueError,
                     "without uv, y must be the (H*3/2) x W %s frame cv2.cvtColor takes "
                     "(luma rows, then H/2 rows of interleaved chroma), so its row count "
                     "must be a multiple of 3; got shape %s", fmt,
                     shape_str(ya, shape, sizeof shape));
        return NULL;
    }
    height = uv_arg == Py_None ? PyArray_DIM(ya, 0) / 3 * 2 : PyArray_DIM(ya, 0);
    width = PyArray_DIM(ya, 1);
    if (height < 2 || width < 2 || height % 2 != 0 || width % 2 != 0) {
        PyErr_Format(PyExc_ValueError,
                     "the frame must have an even, non-zero width and height (as OpenCV "
                     "requires for %s), got H x W = %lld x %lld from y of shape %s", fmt,
                     (long long)height, (long long)width, shape_str(ya, shape, sizeof shape));
        return NULL;
    }
    if (height > FM_NV12_MAX_SIDE || width > FM_NV12_MAX_SIDE) {
        PyErr_Format(PyExc_ValueError, "y is too large: %s", shape_str(ya, shape, sizeof shape));
        return NULL;
    }
    if (check_rows(ya, "y", &y) < 0)
        return NULL;

    /* -- uv -- */
    if (uv_arg == Py_None) {
        uv.data = y.data + (size_t)height * y.pitch;  /* the rows after the luma */
        uv.pitch = y.pitch;
    }
    else {
        if ((uva = as_u8_array(uv_arg, "uv")) == NULL)
            return NULL;
        int nd = PyArray_NDIM(uva);
        npy_intp *d = PyArray_DIMS(uva);
        int ok = (nd == 3 && d[0] == height / 2 && d[1] == width / 2 && d[2] == 2)
                 || (nd == 2 && d[0] == height / 2 && d[1] == width);
        if (!ok) {
            PyErr_Format(PyExc_ValueError,
                         "uv must be (H/2) x (W/2) x 2 or (H/2) x W interleaved chroma, i.e. "
                         "(%lld, %lld, 2) or (%lld, %lld) for a %lld x %lld (H x W) frame; got %s",
                         (long long)(height / 2), (long long)(width / 2),
                         (long long)(height / 2), (long long)width, (long long)height,
                         (long long)width, shape_str(uva, shape, sizeof shape));
            return NULL;
        }
        if (check_rows(uva, "uv", &uv) < 0)
            return NULL;
    }

    /* -- out -- */
    if (out_arg != Py_None) {
        if ((outa = as_u8_array(out_arg, "out")) == NULL)
            return NULL;
        if (PyArray_NDIM(outa) != 3 || PyArray_DIM(outa, 0) != height
            || PyArray_DIM(outa, 1) != width || PyArray_DIM(outa, 2) != 3) {
            PyErr_Format(PyExc_ValueError, "out must have shape (%lld, %lld, 3), got %s",
                         (long long)height, (long long)width, shape_str(outa, shape, sizeof shape));
            return NULL;
        }
        if (!PyArray_ISWRITEABLE(outa)) {
            PyErr_SetString(PyExc_ValueError, "out is read-only");
            return NULL;
        }
        if (check_rows(outa, "out", &out) < 0)
            return NULL;
        if (spans_overlap(&out, height, width * 3, &y, height, width)
            || spans_overlap(&out, height, width * 3, &uv, height / 2, width)) {
            PyErr_SetString(PyExc_ValueError, "out overlaps the input planes");
            return NULL;
        }
        result = Py_NewRef(out_arg);
    }
    else {
        npy_intp dims[3] = {height, width, 3};
        result = PyArray_SimpleNew(3, dims, NPY_UINT8);
        if (result == NULL)
            return NULL;
        out.data = PyArray_DATA((PyArrayObject *)result);
        out.pitch = (size_t)width * 3;
    }

    int flags = (rgb ? FM_YUV_RGB : 0) | (nv21 ? FM_YUV_NV21 : 0);
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = fm_nv12_to_bgr_cpu(y.data, y.pitch, uv.data, uv.pitch, out.data, out.pitch,
                            (int)width, (int)height, matrix, flags);
    Py_END_ALLOW_THREADS
    if (rc != FM_YUV_OK) {  /* unreachable after the checks above; kept honest */
        Py_DECREF(result);
        PyErr_SetString(PyExc_ValueError, "the YUV conversion refused its arguments");
        return NULL;
    }
    return result;
}

static PyObject *convert(PyObject *args, PyObject *kwargs, int nv21)
{
    static char *kwlist[] = {"", "", "out", "rgb", "matrix", NULL};
    PyObject *y, *uv = Py_None, *out = Py_None, *matrix_arg = NULL;
    int rgb = 0, matrix = FM_YUV_MATRIX_BT601;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs,
                                     nv21 ? "O|O$OpO:_cpu_nv21_to_bgr" : "O|O$OpO:_cpu_nv12_to_bgr",
                                     kwlist, &y, &uv, &out, &rgb, &matrix_arg))
        return NULL;
    if (matrix_arg != NULL) {
        Py_ssize_t size;
        const char *name;
        if (!PyUnicode_Check(matrix_arg)) {
            PyErr_Format(PyExc_TypeError, "matrix must be a str such as 'bt601', not %.200s",
                         Py_TYPE(matrix_arg)->tp_name);
            return NULL;
        }
        if ((name = PyUnicode_AsUTF8AndSize(matrix_arg, &size)) == NULL)
            return NULL;
        /* strlen: "bt601\0..." must not pass as "bt601" */
        matrix = strlen(name) == (size_t)size ? fm_yuv_matrix_id(name) : -1;
        if (matrix < 0) {
            PyErr_Format(PyExc_ValueError, "matrix must be one of " FM_YUV_MATRIX_NAMES ", not %R",
                         matrix_arg);
            return NULL;
        }
    }
    return nv12_to_bgr_impl(y, uv, out, rgb, matrix, nv21);
}

static PyObject *cpu_nv12_to_bgr(PyObject *Py_UNUSED(module), PyObject *args, PyObject *kwargs)
{
    return convert(args, kwargs, 0);
}

static PyObject *cpu_nv21_to_bgr(PyObject *Py_UNUSED(module), PyObject *args, PyObject *kwargs)
{
    return convert(args, kwargs, 1);
}

PyMethodDef fm_nv12_cpu_methods[] = {
    {"_cpu_nv12_to_bgr", (PyCFunction)(void (*)(void))cpu_nv12_to_bgr,
     METH_VARARGS | METH_KEYWORDS, FM_DOC_CPU_NV12_TO_BGR},
    {"_cpu_nv21_to_bgr", (PyCFunction)(void (*)(void))cpu_nv21_to_bgr,
     METH_VARARGS | METH_KEYWORDS, FM_DOC_CPU_NV21_TO_BGR},
    {NULL, NULL, 0, NULL},
};
