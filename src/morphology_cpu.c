/* _fastmog._cpu_morphology: the host face of erosion, dilation, opening and
 * closing (src/morphology_loop.c) for numpy masks, exported as the method
 * table fm_morphology_cpu_methods. Every argument is checked before anything
 * is allocated or written; the structuring element arrives built
 * (fastmog.motion makes it as cv2.getStructuringElement does). */
#include "fastmog.h"
#include "docstrings.h"
#include "morphology_loop.h"

#include <string.h>

/* A mask, and the element too: one channel of uint8. */
static const fm_image_rule mask_rule = {
    .dtypes = FM_DTYPE_BIT(NPY_UINT8), .channels = FM_CHANNELS_BIT(1)};

/* Whether the byte spans of two images intersect. */
static int images_overlap(const fm_host_image *a, const fm_host_image *b)
{
    uintptr_t a0 = (uintptr_t)a->data, b0 = (uintptr_t)b->data;
    uintptr_t a1 = a0 + (size_t)(a->shape.height - 1) * a->pitch + fm_image_row_bytes(&a->shape);
    uintptr_t b1 = b0 + (size_t)(b->shape.height - 1) * b->pitch + fm_image_row_bytes(&b->shape);
    return a0 < b1 && b0 < a1;
}

/* A new C-contiguous H x W uint8 array (or H x W x 1, as `like`). */
static PyObject *new_mask_like(const fm_image_shape *like)
{
    npy_intp dims[3] = {like->height, like->width, 1};
    return PyArray_SimpleNew(like->ndim, dims, NPY_UINT8);
}

/* _cpu_morphology(mask, element, op, iterations, /, *, out=None) */
static PyObject *cpu_morphology(PyObject *Py_UNUSED(module), PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"", "", "", "", "out", NULL};
    PyObject *mask_arg, *element_arg, *out_arg = Py_None;
    int op, iterations;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOii|$O:_cpu_morphology", kwlist,
                                     &mask_arg, &element_arg, &op, &iterations, &out_arg))
        return NULL;
    fm_host_image mask, out, element;
    if (fm_host_image_check(mask_arg, "mask", &mask_rule, &mask) < 0)
        return NULL;
    if (fm_host_image_check(element_arg, "kernel", &mask_rule, &element) < 0)
        return NULL;
    int kw = element.shape.width, kh = element.shape.height;
    if (kw > 31 || kh > 31 || element.pitch != (size_t)kw) {
        PyErr_Format(PyExc_ValueError, "kernel must be a C-contiguous element of at most "
                     "31 x 31, got %d x %d (W x H)", kw, kh);
        return NULL;
    }
    int any = 0;
    for (int i = 0; i < kw * kh; i++)
        any |= element.data[i] != 0;
    if (!any) {
        PyErr_SetString(PyExc_ValueError, "kernel has no nonzero entry: it reaches no pixel");
        return NULL;
    }
    /* fastmog.motion._element's bound, held here too: 2 * iterations passes */
    if (op < FM_MORPH_ERODE || op > FM_MORPH_CLOSE || iterations < 1 || iterations > 1000) {
        PyErr_Format(PyExc_ValueError, "op %d or iterations %d out of range", op, iterations);
        return NULL;
    }
    PyObject *result;
    if (out_arg != Py_None) {
        const fm_image_rule out_rule = {.dtypes = FM_DTYPE_BIT(NPY_UINT8),
                                        .channels = FM_CHANNELS_BIT(1),
                                        .height = mask.shape.height, .width = mask.shape.width,
                                        .like = "mask", .writable = 1};
        if (fm_host_image_check(out_arg, "out", &out_rule, &out) < 0)
            return NULL;
        result = Py_NewRef(out_arg);
    }
    else {
        if ((result = new_mask_like(&mask.shape)) == NULL)
            return NULL;
        if (fm_host_image_check(result, "out", NULL, &out) < 0) {
            Py_DECREF(result);
            return NULL;
        }
    }

    /* out may be the mask itself (in place, as cv2 allows): read a copy */
    const int twice = op == FM_MORPH_OPEN || op == FM_MORPH_CLOSE;
    const size_t bytes = (size_t)mask.shape.height * (size_t)mask.shape.width;
    const int copy = images_overlap(&mask, &out);
    const int passes = iterations > 1 || twice;
    unsigned char *work = NULL;
    if (copy || passes) {
        work = PyMem_RawMalloc(bytes * (size_t)(copy + passes));
        if (work == NULL) {
            Py_DECREF(result);
            return PyErr_NoMemory();
        }
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    const unsigned char *src = (const unsigned char *)mask.data;
    size_t src_pitch = mask.pitch;
    if (copy) {
        for (int y = 0; y < mask.shape.height; y++)
            memcpy(work + (size_t)y * mask.shape.width, mask.data + (size_t)y * mask.pitch,
                   (size_t)mask.shape.width);
        src = work;
        src_pitch = (size_t)mask.shape.width;
    }
    unsigned char *scratch = passes ? work + (copy ? bytes : 0) : NULL;
    rc = fm_morphology_cpu(src, src_pitch, (unsigned char *)out.data, out.pitch, scratch,
                           (size_t)mask.shape.width, mask.shape.width, mask.shape.height,
                           (const unsigned char *)element.data, kw, kh, op, iterations);
    Py_END_ALLOW_THREADS
    PyMem_RawFree(work);
    if (rc != FM_MORPH_OK) {
        Py_DECREF(result);
        if (rc == FM_MORPH_ENOMEM)
            return PyErr_NoMemory();
        /* unreachable after the checks above; kept honest */
        PyErr_SetString(PyExc_ValueError, "the morphology loop refused its arguments");
        return NULL;
    }
    return result;
}

PyMethodDef fm_morphology_cpu_methods[] = {
    {"_cpu_morphology", (PyCFunction)(void (*)(void))cpu_morphology,
     METH_VARARGS | METH_KEYWORDS, FM_DOC_CPU_MORPHOLOGY},
    {NULL, NULL, 0, NULL},
};
