/* Snapshots of a MOG2 model: the versioned dict both subtractors give and
 * take, so a model moves between the GPU and the host, or outlives its
 * process, bit for bit.
 *
 * Format "fastmog.mog2", version 1 (docs/api.md says the same):
 *   format, version       "fastmog.mog2", 1
 *   parameters            {name: value} of every constructor parameter
 *   geometry              {width, height, channels, is_float, n_mixtures}:
 *                         what the model was built for
 *   frames_seen           frames since the model (re)started: the automatic
 *                         learning rate's clock
 *   weight, variance      float32 (n_mixtures, height, width)
 *   mean                  float32 (n_mixtures, channels, height, width)
 *   mode_count            uint8 (height, width), each at most n_mixtures
 * Both models convert to and from these planes: the GPU's tiles
 * (mog2_tiles.c) and the host's per-pixel blocks. Modes at or
 * beyond a pixel's mode_count are zero in a snapshot (in a model they hold
 * stale values that nothing reads, and the GPU's differ from the host's),
 * so the snapshots of one model are equal byte for byte wherever it ran. */
#include "mog2_base.h"

static const char *const array_names[FM_MOG2_SNAPSHOT_ARRAYS] = {
    "weight", "variance", "mean", "mode_count"};

#define PARAMETER_NAME(i, name, kind, lo, hi, def, Camel, doc) #name,
static const char *const parameter_names[] = {FM_MOG2_FIELDS(PARAMETER_NAME)};
#define N_PARAMETERS ((int)(sizeof parameter_names / sizeof parameter_names[0]))

/* The canonical shape of array k for geometry g. */
static int array_shape(const fm_mog2_geometry *g, int k, npy_intp *dims, int *type)
{
    const npy_intp m = g->n_mixtures, c = g->channels, h = g->height, w = g->width;
    *type = k == FM_MOG2_SNAP_MODE_COUNT ? NPY_UINT8 : NPY_FLOAT32;
    switch (k) {
    case FM_MOG2_SNAP_WEIGHT:
    case FM_MOG2_SNAP_VARIANCE:
        dims[0] = m, dims[1] = h, dims[2] = w;
        return 3;
    case FM_MOG2_SNAP_MEAN:
        dims[0] = m, dims[1] = c, dims[2] = h, dims[3] = w;
        return 4;
    default:
        dims[0] = h, dims[1] = w;
        return 2;
    }
}

int fm_mog2_snapshot_arrays(const fm_mog2_geometry *g, PyObject *arrays[FM_MOG2_SNAPSHOT_ARRAYS])
{
    for (int k = 0; k < FM_MOG2_SNAPSHOT_ARRAYS; ++k)
        arrays[k] = NULL;
    for (int k = 0; k < FM_MOG2_SNAPSHOT_ARRAYS; ++k) {
        npy_intp dims[4];
        int type, nd = array_shape(g, k, dims, &type);
        if ((arrays[k] = PyArray_SimpleNew(nd, dims, type)) == NULL) {
            fm_mog2_snapshot_arrays_clear(arrays);
            return -1;
        }
    }
    return 0;
}

void fm_mog2_snapshot_arrays_clear(PyObject *arrays[FM_MOG2_SNAPSHOT_ARRAYS])
{
    for (int k = 0; k < FM_MOG2_SNAPSHOT_ARRAYS; ++k)
        Py_CLEAR(arrays[k]);
}

/* Zeroes the modes at or beyond each pixel's mode count: the GPU kernel
 * stores only the modes in use, the host writes a dropped mode's weight, so
 * their stale slots differ though their models are the same. */
static void clear_stale_modes(const fm_mog2_geometry *g,
                              PyObject *arrays[FM_MOG2_SNAPSHOT_ARRAYS])
{
    const size_t pixels = (size_t)g->height * (size_t)g->width;
    const int modes = g->n_mixtures, channels = g->channels;
    float *weight = PyArray_DATA((PyArrayObject *)arrays[FM_MOG2_SNAP_WEIGHT]);
    float *variance = PyArray_DATA((PyArrayObject *)arrays[FM_MOG2_SNAP_VARIANCE]);
    float *mean = PyArray_DATA((PyArrayObject *)arrays[FM_MOG2_SNAP_MEAN]);
    const unsigned char *count = PyArray_DATA((PyArrayObject *)arrays[FM_MOG2_SNAP_MODE_COUNT]);
    Py_BEGIN_ALLOW_THREADS                 /* the arrays are the caller's alone */
    for (size_t i = 0; i < pixels; ++i)
        for (int m = count[i]; m < modes; ++m) {
            weight[(size_t)m * pixels + i] = 0.0f;
            variance[(size_t)m * pixels + i] = 0.0f;
            for (int c = 0; c < channels; ++c)
                mean[((size_t)m * channels + c) * pixels + i] = 0.0f;
        }
    Py_END_ALLOW_THREADS
}

PyObject *fm_mog2_snapshot_dict(fm_MOG2Base *self, PyObject *arrays[FM_MOG2_SNAPSHOT_ARRAYS])
{
    const fm_mog2_geometry *g = &self->geometry;
    PyObject *parameters = PyDict_New(), *snapshot = NULL;
    if (parameters == NULL)
        return NULL;
    clear_stale_modes(g, arrays);
    for (int i = 0; i < N_PARAMETERS; ++i) {
        PyObject *value = fm_mog2_param_get((PyObject *)self, (void *)(intptr_t)i);
        if (value == NULL || PyDict_SetItemString(parameters, parameter_names[i], value) < 0) {
            Py_XDECREF(value);
            goto error;
        }
        Py_DECREF(value);
    }
    snapshot = Py_BuildValue(
        "{s:s,s:i,s:O,s:{s:i,s:i,s:i,s:O,s:i},s:l}", "format", FM_MOG2_SNAPSHOT_FORMAT,
        "version", FM_MOG2_SNAPSHOT_VERSION, "parameters", parameters, "geometry",
        "width", g->width, "height", g->height, "channels", g->channels,
        "is_float", g->is_float ? Py_True : Py_False, "n_mixtures", g->n_mixtures,
        "frames_seen", self->frames_seen);
    if (snapshot == NULL)
        goto error;
    for (int k = 0; k < FM_MOG2_SNAPSHOT_ARRAYS; ++k)
        if (PyDict_SetItemString(snapshot, array_names[k], arrays[k]) < 0)
            goto error;
    Py_DECREF(parameters);
    return snapshot;

error:
    Py_DECREF(parameters);
    Py_XDECREF(snapshot);
    return NULL;
}

/* snapshot[key], which must exist (borrowed). */
static PyObject *item(PyObject *snapshot, const char *key)
{
    PyObject *value = PyDict_GetItemString(snapshot, key);
    if (value == NULL)
        PyErr_Format(PyExc_ValueError, "the snapshot lacks \"%s\": not a complete fastmog "
                     "MOG2 snapshot", key);
    return value;
}

/* An int from lo to hi (bools refused), from mapping[key]. */
static int whole(PyObject *mapping, const char *key, long lo, long hi, long *out)
{
    PyObject *value = item(mapping, key);
    if (value == NULL)
        return -1;
    if (PyBool_Check(value) || !PyLong_Check(value)) {
        PyErr_Format(PyExc_TypeError, "the snapshot's %s must be an int, not %.100s", key,
                     Py_TYPE(value)->tp_name);
        return -1;
    }
    long v = PyLong_AsLong(value);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (v < lo || v > hi) {
        PyErr_Format(PyExc_ValueError, "the snapshot's %s must be from %ld to %ld, got %ld",
                     key, lo, hi, v);
        return -1;
    }
    *out = v;
    return 0;
}

static int read_geometry(PyObject *geometry, fm_mog2_geometry *g)
{
    if (!PyDict_Check(geometry)) {
        PyErr_SetString(PyExc_TypeError, "the snapshot's geometry must be a dict");
        return -1;
    }
    long width, height, channels, n_mixtures;
    if (whole(geometry, "width", 1, INT32_MAX, &width) < 0
        || whole(geometry, "height", 1, INT32_MAX, &height) < 0
        || whole(geometry, "channels", 1, 4, &channels) < 0
        || whole(geometry, "n_mixtures", 1, FM_MOG2_MAX_MIXTURES, &n_mixtures) < 0)
        return -1;
    if (channels == 2) {
        PyErr_SetString(PyExc_ValueError, "the snapshot's channels must be 1, 3 or 4, got 2");
        return -1;
    }
    PyObject *is_float = item(geometry, "is_float");
    if (is_float == NULL)
        return -1;
    if (!PyBool_Check(is_float)) {
        PyErr_SetString(PyExc_TypeError, "the snapshot's is_float must be a bool");
        return -1;
    }
    *g = (fm_mog2_geometry){(int)width, (int)height, (int)channels, is_float == Py_True,
                            (int)n_mixtures};
    return 0;
}

/* snapshot[key] as a C-contiguous aligned array of exactly the canonical
 * dtype and shape (borrowed). */
static PyArrayObject *read_array(PyObject *snapshot, const fm_mog2_geometry *g, int k)
{
    const char *key = array_names[k];
    PyObject *value = item(snapshot, key);
    if (value == NULL)
        return NULL;
    npy_intp dims[4];
    int type, nd = array_shape(g, k, dims, &type);
    if (!PyArray_Check(value) || PyArray_TYPE((PyArrayObject *)value) != type) {
        PyErr_Format(PyExc_TypeError, "the snapshot's %s must be a %s numpy array", key,
                     type == NPY_UINT8 ? "uint8" : "float32");
        return NULL;
    }
    PyArrayObject *a = (PyArrayObject *)value;
    int same = PyArray_NDIM(a) == nd;
    for (int d = 0; same && d < nd; ++d)
        same = PyArray_DIM(a, d) == dims[d];
    if (!same) {
        PyErr_Format(PyExc_ValueError, "the snapshot's %s does not have the shape its geometry "
                     "gives (%dx%d, %d channels, %d modes): a damaged or mixed snapshot", key,
                     g->width, g->height, g->channels, g->n_mixtures);
        return NULL;
    }
    if (!PyArray_IS_C_CONTIGUOUS(a) || !PyArray_ISALIGNED(a) || !PyArray_ISNOTSWAPPED(a)) {
        PyErr_Format(PyExc_ValueError, "the snapshot's %s must be C-contiguous, aligned and in "
                     "native byte order (numpy.ascontiguousarray makes it so)", key);
        return NULL;
    }
    return a;
}

int fm_mog2_snapshot_read(PyObject *snapshot, fm_mog2_snapshot *out)
{
    if (!PyDict_Check(snapshot)) {
        PyErr_Format(PyExc_TypeError, "a snapshot is the dict snapshot() returns (or "
                     "fastmog.load_snapshot reads), not %.100s", Py_TYPE(snapshot)->tp_name);
        return -1;
    }
    PyObject *format = item(snapshot, "format");
    if (format == NULL)
        return -1;
    if (!PyUnicode_Check(format)
        || PyUnicode_CompareWithASCIIString(format, FM_MOG2_SNAPSHOT_FORMAT) != 0) {
        PyErr_Format(PyExc_ValueError, "not a fastmog MOG2 snapshot: its format is %R, not "
                     "\"%s\"", format, FM_MOG2_SNAPSHOT_FORMAT);
        return -1;
    }
    long version, frames_seen;
    if (whole(snapshot, "version", 0, LONG_MAX, &version) < 0)
        return -1;
    if (version != FM_MOG2_SNAPSHOT_VERSION) {
        PyErr_Format(PyExc_ValueError, "a version %ld snapshot: this fastmog reads version %d",
                     version, FM_MOG2_SNAPSHOT_VERSION);
        return -1;
    }
    PyObject *geometry = item(snapshot, "geometry");
    /* OpenCV counts frames in an int: the learning rate's clock stays one */
    if (geometry == NULL || read_geometry(geometry, &out->geometry) < 0
        || whole(snapshot, "frames_seen", 0, INT_MAX, &frames_seen) < 0)
        return -1;
    out->frames_seen = frames_seen;
    if ((out->parameters = item(snapshot, "parameters")) == NULL)
        return -1;
    if (!PyDict_Check(out->parameters)) {
        PyErr_SetString(PyExc_TypeError, "the snapshot's parameters must be a dict");
        return -1;
    }
    /* every parameter, none more: a missing one must not fall back to its default */
    for (int i = 0; i < N_PARAMETERS; ++i)
        if (PyDict_GetItemString(out->parameters, parameter_names[i]) == NULL) {
            PyErr_Format(PyExc_ValueError, "the snapshot's parameters lack \"%s\"",
                         parameter_names[i]);
            return -1;
        }
    if (PyDict_Size(out->parameters) != N_PARAMETERS) {
        PyErr_SetString(PyExc_ValueError, "the snapshot's parameters name one that MOG2 does "
                        "not have");
        return -1;
    }
    PyArrayObject *found[FM_MOG2_SNAPSHOT_ARRAYS];
    for (int k = 0; k < FM_MOG2_SNAPSHOT_ARRAYS; ++k)
        if ((found[k] = read_array(snapshot, &out->geometry, k)) == NULL)
            return -1;
    /* Owned from here: the mode counts as a copy of our own, checked, so no
     * Python code run later (the constructor's) can change what the update's
     * bounds rest on; the others referenced. */
    out->parameters = Py_NewRef(out->parameters);
    for (int k = 0; k < FM_MOG2_SNAPSHOT_ARRAYS; ++k)
        out->arrays[k] = k == FM_MOG2_SNAP_MODE_COUNT
                             ? (PyArrayObject *)PyArray_NewCopy(found[k], NPY_CORDER)
                             : (PyArrayObject *)Py_NewRef(found[k]);
    if (out->arrays[FM_MOG2_SNAP_MODE_COUNT] == NULL) {
        fm_mog2_snapshot_clear(out);
        return -1;
    }
    /* a count beyond the modes would send the update past its arrays */
    const unsigned char *count = PyArray_DATA(out->arrays[FM_MOG2_SNAP_MODE_COUNT]);
    size_t pixels = (size_t)out->geometry.width * (size_t)out->geometry.height;
    for (size_t i = 0; i < pixels; ++i) {
        if (count[i] > out->geometry.n_mixtures) {
            PyErr_Format(PyExc_ValueError, "the snapshot's mode_count holds %d at pixel %zu, "
                         "more than its %d modes: a damaged snapshot", count[i], i,
                         out->geometry.n_mixtures);
            fm_mog2_snapshot_clear(out);
            return -1;
        }
    }
    return 0;
}

void fm_mog2_snapshot_clear(fm_mog2_snapshot *s)
{
    Py_CLEAR(s->parameters);
    for (int k = 0; k < FM_MOG2_SNAPSHOT_ARRAYS; ++k)
        Py_CLEAR(s->arrays[k]);
}

PyObject *fm_mog2_snapshot_subtractor(PyTypeObject *type, const fm_mog2_snapshot *s,
                                      PyObject *device)
{
    PyObject *kwargs = PyDict_Copy(s->parameters), *args = NULL, *sub = NULL;
    if (kwargs == NULL)
        return NULL;
    if ((device == NULL || PyDict_SetItemString(kwargs, "device", device) == 0)
        && (args = PyTuple_New(0)) != NULL)
        sub = PyObject_Call((PyObject *)type, args, kwargs);
    Py_XDECREF(args);
    Py_DECREF(kwargs);
    return sub;
}
