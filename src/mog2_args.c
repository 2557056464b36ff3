/* The arguments of both subtractors' verbs (apply, apply_batch, apply_cameras,
 * get_background_image), parsed and checked the same way for both: the
 * learning rate, the stream, the frame and mask sequences, the cameras, and
 * the image rules each argument must meet. */
#include "mog2_base.h"

#include <string.h>

/* ---- apply and apply_batch -------------------------------------------------- */

int fm_mog2_learning_rate_arg(PyObject *arg, double *rate)
{
    *rate = -1.0;
    if (arg == NULL)
        return 0;
    if (!PyFloat_Check(arg) && !PyLong_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "learning_rate must be a number, not %.200s",
                     Py_TYPE(arg)->tp_name);
        return -1;
    }
    double v = PyFloat_AsDouble(arg);
    if (v == -1.0 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError))
            return -1;
        PyErr_Clear();
        /* An int too large for a float: a huge negative one is still "automatic". */
        v = PyObject_RichCompareBool(arg, Py_False, Py_LT) == 1 ? -HUGE_VAL : HUGE_VAL;
    }
    /* OpenCV takes any finite rate (1 and more restart the model every frame)
     * and any negative one (automatic); NaN and +inf mean nothing. */
    if (isnan(v) || v == HUGE_VAL) {
        PyErr_Format(PyExc_ValueError,
                     "learning_rate must be a finite number (negative: automatic), got %R", arg);
        return -1;
    }
    *rate = v;
    return 0;
}

/* Keyword `key` among `names` (NULL-ended): its index, or -1. */
static int keyword_index(PyObject *key, const char *const *names)
{
    for (int i = 0; names[i] != NULL; i++)
        if (PyUnicode_Check(key) && PyUnicode_CompareWithASCIIString(key, names[i]) == 0)
            return i;
    return -1;
}

/* apply and apply_batch are METH_FASTCALL: their arguments are read where the
 * caller left them, with no tuple or dict built per frame (the host cost of
 * a frame is mostly this and the launch). apply(frame, learning_rate=-1, *,
 * stream, fgmask=None, known_foreground=None, timer=None); apply_batch takes
 * frames and fgmasks; the host subtractor has no stream. */
int fm_mog2_call_args_parse(fm_state *st, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames, int flags, int device, fm_mog2_call_args *a)
{
    /* Indexed by flags: host apply, host apply_batch, GPU apply, GPU apply_batch.
     * Slot 0 is learning_rate (also positional); the rest are keyword-only. */
    static const char *const keywords[4][6] = {
        {"learning_rate", "fgmask", "known_foreground", "timer", NULL},
        {"learning_rate", "fgmasks", "known_foreground", "timer", NULL},
        {"learning_rate", "fgmask", "known_foreground", "timer", "stream", NULL},
        {"learning_rate", "fgmasks", "known_foreground", "timer", "stream", NULL},
    };
    const char *const *names = keywords[flags];
    const char *fname = flags & FM_MOG2_CALL_BATCH ? "apply_batch" : "apply";
    PyObject *values[5] = {NULL, NULL, NULL, NULL, NULL};
    a->st = st;
    a->stream = NULL;
    a->fgmasks = a->known = Py_None;
    a->timer = NULL;
    if (nargs < 1 || nargs > 2) {
        PyErr_Format(PyExc_TypeError, "%s() takes 1 or 2 positional arguments (%s, "
                     "learning_rate) but %zd were given", fname,
                     flags & FM_MOG2_CALL_BATCH ? "frames" : "frame", nargs);
        return -1;
    }
    a->frames = args[0];
    values[0] = nargs == 2 ? args[1] : NULL;
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, i);
        int k = keyword_index(key, names);
        if (k < 0) {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%S'",
                         fname, key);
            return -1;
        }
        if (values[k] != NULL) {
            PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'",
                         fname, names[k]);
            return -1;
        }
        values[k] = args[nargs + i];
    }
    if (values[1] != NULL)
        a->fgmasks = values[1];
    if (values[2] != NULL)
        a->known = values[2];
    a->timer = values[3];
    if (flags & FM_MOG2_CALL_GPU) {
        if ((a->stream = fm_require_stream(st, values[4], device)) == NULL)
            return -1;
        if (!(flags & FM_MOG2_CALL_BATCH) && a->fgmasks != Py_None
            && fm_gpumat_check_open(st, a->fgmasks, "fgmask") == NULL)
            return -1;
    }
    return fm_mog2_learning_rate_arg(values[0], &a->learning_rate);
}

/* The step of one frame after a model built for `had` has seen
 * `frames_seen` frames. */
/* ---- arguments of the batched and multi-camera calls ---------------------- */

PyObject *fm_mog2_items(PyObject *arg, const char *name, Py_ssize_t count)
{
    char message[96];
    snprintf(message, sizeof message, "%s must be a sequence (a list, a tuple or an array)",
             name);
    PyObject *items = PySequence_Fast(arg, message);
    if (items != NULL && PyList_Check(items))
        Py_SETREF(items, PyList_AsTuple(items));
    if (items != NULL && count >= 0 && PySequence_Fast_GET_SIZE(items) != count) {
        PyErr_Format(PyExc_ValueError, "%s has %zd entries for %zd frames", name,
                     PySequence_Fast_GET_SIZE(items), count);
        Py_CLEAR(items);
    }
    if (items != NULL && PySequence_Fast_GET_SIZE(items) > INT_MAX / 2) {
        PyErr_Format(PyExc_ValueError, "%s: too many entries for one call", name);
        Py_CLEAR(items);
    }
    return items;
}

/* The bytes a numpy array spans, [*lo, *hi); 0 when it spans none. */
static int array_extent(PyArrayObject *a, const char **lo, const char **hi)
{
    const char *first = PyArray_BYTES(a), *last = first + PyArray_ITEMSIZE(a);
    for (int d = 0; d < PyArray_NDIM(a); d++) {
        npy_intp n = PyArray_DIM(a, d), stride = PyArray_STRIDE(a, d);
        if (n == 0)
            return 0;
        if (stride > 0)
            last += (n - 1) * stride;
        else
            first += (n - 1) * stride;
    }
    *lo = first;
    *hi = last;
    return 1;
}

/* The bytes an open GpuMat spans, [*lo, *hi). */
static void gpumat_extent(const fm_GpuMat *m, const char **lo, const char **hi)
{
    *lo = m->data;
    *hi = m->data + m->pitch * (size_t)(m->shape.height - 1) + fm_image_row_bytes(&m->shape);
}

/* The extent of a mask argument of one kind (1: a numpy array, 2: an open
 * GpuMat; GpuMats only when `st` is given), or 0: none to compare. */
static int mask_extent(fm_state *st, PyObject *obj, const char **lo, const char **hi)
{
    if (PyArray_Check(obj))
        return array_extent((PyArrayObject *)obj, lo, hi) ? 1 : 0;
    if (st != NULL && Py_IS_TYPE(obj, st->GpuMat_type) && !((fm_GpuMat *)obj)->closed) {
        gpumat_extent((fm_GpuMat *)obj, lo, hi);
        return 2;
    }
    return 0;
}

/* Whether two images of one row pitch share a pixel: side-by-side views of
 * one GpuMat interleave their byte ranges row by row without sharing any. */
static int pitched_overlap(const fm_GpuMat *a, const fm_GpuMat *b)
{
    if (b->data < a->data) {
        const fm_GpuMat *t = a;
        a = b;
        b = t;
    }
    ptrdiff_t p = (ptrdiff_t)a->pitch, d = b->data - a->data;
    ptrdiff_t row = d / p, col = d % p;
    ptrdiff_t wa = (ptrdiff_t)fm_image_row_bytes(&a->shape);
    ptrdiff_t wb = (ptrdiff_t)fm_image_row_bytes(&b->shape);
    ptrdiff_t ha = a->shape.height, hb = b->shape.height;
    /* b's rows in a's frame start at `row`, columns [col, col + wb); a row
     * longer than what is left of the pitch goes on in the next row. */
    int rows = row < ha && row + hb > 0;
    int cols = col < wa && col + wb > 0;
    int wrap = col + wb > p && row + 1 < ha;
    return (rows && cols) || wrap;
}

/* Each mask is written once per frame: two entries that are one object, or
 * arrays (GpuMats) over shared bytes, would see one frame's mask overwrite
 * another's. ValueError naming the two indices. */
static int masks_distinct(fm_state *st, PyObject *masks)
{
    Py_ssize_t n = PySequence_Fast_GET_SIZE(masks);
    PyObject **items = PySequence_Fast_ITEMS(masks);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (items[i] == Py_None)
            continue;
        for (Py_ssize_t j = i + 1; j < n; j++) {
            int shared = items[i] == items[j];
            const char *a0, *a1, *b0, *b1;
            int kind;
            if (!shared && (kind = mask_extent(st, items[i], &a0, &a1)) != 0
                && mask_extent(st, items[j], &b0, &b1) == kind) {
                shared = a0 < b1 && b0 < a1;
                const fm_GpuMat *a = (const fm_GpuMat *)items[i], *b = (const fm_GpuMat *)items[j];
                if (shared && kind == 2 && a->pitch == b->pitch)
                    shared = pitched_overlap(a, b);
            }
            if (shared) {
                PyErr_Format(PyExc_ValueError,
                             "fgmasks[%zd] and fgmasks[%zd] are the same output buffer: "
                             "each frame needs a mask of its own", i, j);
                return -1;
            }
        }
    }
    return 0;
}

static int sequences_get(fm_state *st, fm_mog2_sequences *seq, PyObject *frames,
                         PyObject *known, PyObject *fgmasks, Py_ssize_t count)
{
    memset(seq, 0, sizeof *seq);
    if ((seq->frames = fm_mog2_items(frames, "frames", count)) == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq->frames);
    if ((known != Py_None && (seq->known = fm_mog2_items(known, "known_foreground", n)) == NULL)
        || (fgmasks != Py_None && ((seq->fgmasks = fm_mog2_items(fgmasks, "fgmasks", n)) == NULL
                                   || masks_distinct(st, seq->fgmasks) < 0))) {
        fm_mog2_sequences_clear(seq);
        return -1;
    }
    seq->count = (int)n;
    return 0;
}

int fm_mog2_sequences_get(fm_mog2_sequences *seq, PyObject *frames, PyObject *known,
                          PyObject *fgmasks, Py_ssize_t count)
{
    return sequences_get(NULL, seq, frames, known, fgmasks, count);
}

int fm_mog2_call_frames(const fm_mog2_call_args *a, int flags, fm_mog2_sequences *seq)
{
    if (flags & FM_MOG2_CALL_BATCH)
        return sequences_get(a->st, seq, a->frames, a->known, a->fgmasks, -1);
    seq->frames = a->frames;
    seq->known = a->known != Py_None ? a->known : NULL;
    seq->fgmasks = a->fgmasks != Py_None ? a->fgmasks : NULL;
    seq->count = seq->one = 1;
    return 0;
}

void fm_mog2_sequences_clear(fm_mog2_sequences *seq)
{
    if (seq->one) {                 /* borrowed */
        seq->frames = seq->known = seq->fgmasks = NULL;
        return;
    }
    Py_CLEAR(seq->frames);
    Py_CLEAR(seq->known);
    Py_CLEAR(seq->fgmasks);
}

static int by_address(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)*(fm_MOG2Base *const *)a, y = (uintptr_t)*(fm_MOG2Base *const *)b;
    return x < y ? -1 : x > y;
}

int fm_mog2_camera_args(PyObject *subs, PyTypeObject *type, PyObject *rate_arg,
                        fm_MOG2Base **cameras, double *rates, fm_MOG2Base **locking)
{
    int count = (int)PySequence_Fast_GET_SIZE(subs);
    for (int k = 0; k < count; ++k) {
        PyObject *obj = PySequence_Fast_GET_ITEM(subs, k);
        if (!PyObject_TypeCheck(obj, type)) {
            PyErr_Format(PyExc_TypeError, "subtractors[%d] must be a %s, not %.100s", k,
                         type->tp_name, Py_TYPE(obj)->tp_name);
            return -1;
        }
        cameras[k] = locking[k] = (fm_MOG2Base *)obj;
    }
    qsort(locking, (size_t)count, sizeof *locking, by_address);
    for (int k = 1; k < count; ++k) {
        if (locking[k] == locking[k - 1]) {
            PyErr_SetString(PyExc_ValueError,
                            "subtractors: the same subtractor appears twice (one model "
                            "cannot take two frames at once; use apply_batch)");
            return -1;
        }
    }
    if (rate_arg == NULL || PyNumber_Check(rate_arg)) {
        double rate;
        if (fm_mog2_learning_rate_arg(rate_arg, &rate) < 0)
            return -1;
        for (int k = 0; k < count; ++k)
            rates[k] = rate;
        return 0;
    }
    PyObject *items = fm_mog2_items(rate_arg, "learning_rate", count);
    if (items == NULL)
        return -1;
    int rc = 0;
    for (int k = 0; k < count && rc == 0; ++k)
        rc = fm_mog2_learning_rate_arg(PySequence_Fast_GET_ITEM(items, k), &rates[k]);
    Py_DECREF(items);
    return rc;
}

/* ---- what each image argument must be -------------------------------------- */

fm_image_rule fm_mog2_frame_rule(void)
{
    fm_image_rule rule = {FM_DTYPE_BIT(NPY_UINT8) | FM_DTYPE_BIT(NPY_FLOAT32), FM_IMAGE_CHANNELS,
                          0, 0, NULL, 0, FM_MOG2_MAX_HEIGHT};
    return rule;
}

fm_image_rule fm_mog2_batch_frame_rule(const fm_image_shape *first)
{
    fm_image_rule rule = {FM_DTYPE_BIT(first->type_num), FM_CHANNELS_BIT(first->channels),
                          first->height, first->width, "frames[0]", 0, 0};
    return rule;
}

fm_image_rule fm_mog2_mask_rule(const fm_image_shape *frame, int writable)
{
    fm_image_rule rule = {FM_DTYPE_BIT(NPY_UINT8), FM_CHANNELS_BIT(1), frame->height,
                          frame->width, "the frame", writable, 0};
    return rule;
}

fm_image_shape fm_mog2_background_shape(const fm_mog2_geometry *g)
{
    fm_image_shape s = {g->height, g->width, g->channels, g->channels == 1 ? 2 : 3,
                        g->is_float ? NPY_FLOAT32 : NPY_UINT8, 0};
    return s;
}

fm_image_rule fm_mog2_background_rule(const fm_mog2_geometry *g)
{
    fm_image_rule rule = {FM_DTYPE_BIT(g->is_float ? NPY_FLOAT32 : NPY_UINT8),
                          FM_CHANNELS_BIT(g->channels), g->height, g->width, "the model", 1, 0};
    return rule;
}
