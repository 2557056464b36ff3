/* _fastmog._cpu_connected_components: the host face of connected-component
 * labelling with statistics (src/components_loop.c) for numpy masks,
 * exported as the method table fm_components_cpu_methods. Every argument is
 * checked before anything is allocated. */
#include "fastmog.h"
#include "docstrings.h"
#include "components_loop.h"

static const fm_image_rule mask_rule = {
    .dtypes = FM_DTYPE_BIT(NPY_UINT8), .channels = FM_CHANNELS_BIT(1)};

/* _cpu_connected_components(mask, connectivity, min_area, foreground, labels, /)
 * -> (stats, centroids, labels or None) */
static PyObject *cpu_connected_components(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *mask_arg;
    int connectivity, foreground, want_labels;
    long long min_area;
    if (!PyArg_ParseTuple(args, "OiLip:_cpu_connected_components", &mask_arg, &connectivity,
                          &min_area, &foreground, &want_labels))
        return NULL;
    fm_host_image mask;
    if (fm_host_image_check(mask_arg, "mask", &mask_rule, &mask) < 0)
        return NULL;
    if (connectivity != 4 && connectivity != 8) {
        PyErr_Format(PyExc_ValueError, "connectivity must be 4 or 8, not %d", connectivity);
        return NULL;
    }
    if (foreground < 0 || foreground > 255 || min_area < 0) {
        PyErr_Format(PyExc_ValueError, "foreground %d or min_area %lld out of range",
                     foreground, min_area);
        return NULL;
    }
    if ((int64_t)mask.shape.height * mask.shape.width >= INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "mask has %lld pixels; at most 2^31 - 2 are labelled",
                     (long long)mask.shape.height * mask.shape.width);
        return NULL;
    }
    npy_intp dims[2] = {mask.shape.height, mask.shape.width};
    PyObject *labels = PyArray_SimpleNew(2, dims, NPY_INT32);
    if (labels == NULL)
        return NULL;
    fm_component *found = NULL;
    int count = 0, rc;
    Py_BEGIN_ALLOW_THREADS
    rc = fm_components_cpu((const unsigned char *)mask.data, mask.pitch, mask.shape.width,
                           mask.shape.height, (unsigned char)foreground, connectivity, min_area,
                           PyArray_DATA((PyArrayObject *)labels), (size_t)mask.shape.width * 4,
                           &found, &count);
    Py_END_ALLOW_THREADS
    if (rc != FM_CC_OK) {
        Py_DECREF(labels);
        if (rc == FM_CC_ENOMEM)
            return PyErr_NoMemory();
        PyErr_SetString(PyExc_ValueError, "the labelling loop refused its arguments");
        return NULL;
    }
    npy_intp sdims[2] = {count, 5}, cdims[2] = {count, 2};
    PyObject *stats = PyArray_SimpleNew(2, sdims, NPY_INT32);
    PyObject *centroids = PyArray_SimpleNew(2, cdims, NPY_FLOAT64);
    PyObject *result = NULL;
    if (stats != NULL && centroids != NULL) {
        int32_t *s = PyArray_DATA((PyArrayObject *)stats);
        double *c = PyArray_DATA((PyArrayObject *)centroids);
        for (int i = 0; i < count; i++) {
            s[5 * i] = found[i].x;
            s[5 * i + 1] = found[i].y;
            s[5 * i + 2] = found[i].width;
            s[5 * i + 3] = found[i].height;
            s[5 * i + 4] = found[i].area;
            c[2 * i] = found[i].cx;
            c[2 * i + 1] = found[i].cy;
        }
        result = PyTuple_Pack(3, stats, centroids, want_labels ? labels : Py_None);
    }
    free(found);
    Py_XDECREF(stats);
    Py_XDECREF(centroids);
    Py_DECREF(labels);
    return result;
}

PyMethodDef fm_components_cpu_methods[] = {
    {"_cpu_connected_components", cpu_connected_components, METH_VARARGS,
     FM_DOC_CPU_CONNECTED_COMPONENTS},
    {NULL, NULL, 0, NULL},
};
