/* The MOG2 spine: one parameter table drives validation, defaults,
 * properties, OpenCV aliases, the constructors' signature and the main job's
 * options; the hidden base type _MOG2Base carries them and the bookkeeping
 * both subtractors share. */
#include "mog2_base.h"
#include "docstrings.h"

#include <math.h>
#include <string.h>

enum field_kind { FIELD_INT, FIELD_BOOL, FIELD_DOUBLE, FIELD_FLOAT };

typedef struct field {
    const char *name;        /* property, keyword and (with dashes) CLI option */
    enum field_kind kind;
    size_t offset;           /* in fm_mog2_settings */
    double lo, hi;           /* inclusive range */
    double fallback;         /* the default, as OpenCV's factory has it */
    const char *camel;       /* OpenCV's name, for getX/setX */
    const char *doc;
} field;

/* The one table: index, name, kind, range, default, OpenCV's CamelCase name,
 * doc. The first three are also positional, as in OpenCV's factory. */
#define FM_MOG2_FIELDS(X)                                                              \
    X(0, history, FIELD_INT, 1, INT32_MAX, 500, History,                                \
      "Frames that shape the model; the automatic learning rate ends at 1/history.")    \
    X(1, var_threshold, FIELD_DOUBLE, 0, HUGE_VAL, 16.0, VarThreshold,                  \
      "Squared Mahalanobis distance under which a pixel is background (Tb).")           \
    X(2, detect_shadows, FIELD_BOOL, 0, 1, 1, DetectShadows,                            \
      "Mark shadows with shadow_value instead of 255.")                                 \
    X(3, n_mixtures, FIELD_INT, 1, FM_MOG2_MAX_MIXTURES, 5, NMixtures,                  \
      "Gaussian modes per pixel (1 to 8). A change restarts the model.")                \
    X(4, background_ratio, FIELD_FLOAT, 0, 1, 0.9, BackgroundRatio,                     \
      "Share of the weight that the background modes hold (TB).")                       \
    X(5, var_threshold_gen, FIELD_FLOAT, 0, HUGE_VAL, 9.0, VarThresholdGen,             \
      "Squared distance under which a sample updates a mode, else a new one (Tg).")     \
    X(6, var_init, FIELD_FLOAT, 0, HUGE_VAL, 15.0, VarInit, "Variance of a new mode.")  \
    X(7, var_min, FIELD_FLOAT, 0, HUGE_VAL, 4.0, VarMin, "Smallest variance of a mode.") \
    X(8, var_max, FIELD_FLOAT, 0, HUGE_VAL, 75.0, VarMax, "Largest variance of a mode.") \
    X(9, complexity_reduction_threshold, FIELD_FLOAT, 0, 1, 0.05,                       \
      ComplexityReductionThreshold, "Prior that prunes weak modes (cT); 0 keeps all.")  \
    X(10, shadow_value, FIELD_INT, 0, 255, 127, ShadowValue, "Mask value of shadows.")  \
    X(11, shadow_threshold, FIELD_FLOAT, 0, 1, 0.5, ShadowThreshold,                    \
      "How much darker than the background a shadow may be (tau).")

#define N_POSITIONAL 3

#define FIELD_ENTRY(i, name, kind, lo, hi, def, Camel, doc) \
    {#name, kind, offsetof(fm_mog2_settings, name), lo, hi, def, #Camel, doc},

static const field fields[] = {FM_MOG2_FIELDS(FIELD_ENTRY)};
#define N_FIELDS ((int)(sizeof fields / sizeof fields[0]))

/* ---- values ---------------------------------------------------------------- */

static void store(fm_mog2_settings *s, const field *f, double v)
{
    char *at = (char *)s + f->offset;
    if (f->kind == FIELD_INT || f->kind == FIELD_BOOL)
        *(int *)at = (int)v;
    else
        *(double *)at = f->kind == FIELD_FLOAT ? (double)(float)v : v;  /* OpenCV keeps floats */
}

static double load(const fm_mog2_settings *s, const field *f)
{
    const char *at = (const char *)s + f->offset;
    if (f->kind == FIELD_INT || f->kind == FIELD_BOOL)
        return *(const int *)at;
    return *(const double *)at;
}

static void settings_default(fm_mog2_settings *s)
{
    for (int i = 0; i < N_FIELDS; i++)
        store(s, &fields[i], fields[i].fallback);
}

static PyObject *field_get(const fm_mog2_settings *s, const field *f)
{
    double v = load(s, f);
    switch (f->kind) {
    case FIELD_INT:
        return PyLong_FromLong((long)v);
    case FIELD_BOOL:
        return PyBool_FromLong(v != 0);
    default:
        return PyFloat_FromDouble(v);
    }
}

static int range_error(const field *f, PyObject *value)
{
    PyObject *lo = PyFloat_FromDouble(f->lo), *hi = PyFloat_FromDouble(f->hi);
    if (lo != NULL && hi != NULL) {
        if (f->kind == FIELD_INT)
            PyErr_Format(PyExc_ValueError, "%s must be an int from %lld to %lld, got %R",
                         f->name, (long long)f->lo, (long long)f->hi, value);
        else if (f->hi == HUGE_VAL)
            PyErr_Format(PyExc_ValueError, "%s must be a finite number >= %R, got %R", f->name,
                         lo, value);
        else
            PyErr_Format(PyExc_ValueError, "%s must be a number from %R to %R, got %R",
                         f->name, lo, hi, value);
    }
    Py_XDECREF(lo);
    Py_XDECREF(hi);
    return -1;
}

/* Converts `value` for `f`, refusing what the field cannot hold. */
static int field_convert(const field *f, PyObject *value, double *out)
{
    if (value == NULL) {
        PyErr_Format(PyExc_AttributeError, "cannot delete %s", f->name);
        return -1;
    }
    if (f->kind == FIELD_BOOL) {
        if (!PyBool_Check(value) && !PyLong_Check(value) && !PyArray_IsScalar(value, Bool)) {
            PyErr_Format(PyExc_TypeError, "%s must be True or False, not %.200s", f->name,
                         Py_TYPE(value)->tp_name);
            return -1;
        }
        int b = PyObject_IsTrue(value);
        if (b < 0)
            return -1;
        *out = b;
        return 0;
    }
    if (f->kind == FIELD_INT) {
        if (!PyLong_Check(value) || PyBool_Check(value)) {
            PyErr_Format(PyExc_TypeError, "%s must be an int, not %.200s", f->name,
                         Py_TYPE(value)->tp_name);
            return -1;
        }
        int overflow;
        long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (v == -1 && PyErr_Occurred())
            return -1;
        if (overflow || v < f->lo || v > f->hi)
            return range_error(f, value);
        *out = (double)v;
        return 0;
    }
    if (!PyFloat_Check(value) && !PyLong_Check(value)) {
        PyErr_Format(PyExc_TypeError, "%s must be a number, not %.200s", f->name,
                     Py_TYPE(value)->tp_name);
        return -1;
    }
    double v = PyFloat_AsDouble(value);
    if (v == -1.0 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError))
            return -1;
        PyErr_Clear();
        return range_error(f, value);
    }
    if (f->kind == FIELD_FLOAT)
        v = (double)(float)v;
    if (!isfinite(v) || v < f->lo || v > f->hi)
        return range_error(f, value);
    *out = v;
    return 0;
}

static int var_order_error(double var_min, double var_max)
{
    PyObject *lo = PyFloat_FromDouble(var_min), *hi = PyFloat_FromDouble(var_max);
    if (lo != NULL && hi != NULL)
        PyErr_Format(PyExc_ValueError,
                     "var_min must not exceed var_max (var_min=%R, var_max=%R); "
                     "set them in an order that keeps var_min <= var_max", lo, hi);
    Py_XDECREF(lo);
    Py_XDECREF(hi);
    return -1;
}

/* Validates and stores one value; `s` is unchanged on error. */
static int field_set(fm_mog2_settings *s, const field *f, PyObject *value)
{
    double v;
    if (field_convert(f, value, &v) < 0)
        return -1;
    fm_mog2_settings next = *s;
    store(&next, f, v);
    if (next.var_min > next.var_max)
        return var_order_error(next.var_min, next.var_max);
    *s = next;
    return 0;
}

static int find_field(const char *name)
{
    for (int i = 0; i < N_FIELDS; i++)
        if (strcmp(fields[i].name, name) == 0)
            return i;
    return -1;
}

/* Parses the constructor's arguments: the first three may be positional, the
 * rest keyword-only; var_min and var_max are checked together at the end. */
static int settings_parse(fm_mog2_settings *s, PyObject *args, PyObject *kwargs,
                          const char *type_name, PyObject **device)
{
    double given[N_FIELDS];
    int have[N_FIELDS] = {0};
    Py_ssize_t nargs = PyTuple_GET_SIZE(args);
    if (nargs > N_POSITIONAL) {
        PyErr_Format(PyExc_TypeError,
                     "%s() takes at most %d positional arguments (history, var_threshold, "
                     "detect_shadows), %zd given", type_name, N_POSITIONAL, nargs);
        return -1;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        if (field_convert(&fields[i], PyTuple_GET_ITEM(args, i), &given[i]) < 0)
            return -1;
        have[i] = 1;
    }
    if (device != NULL)
        *device = NULL;
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (kwargs != NULL && PyDict_Next(kwargs, &pos, &key, &value)) {
        const char *name = PyUnicode_AsUTF8(key);
        if (name == NULL)
            return -1;
        if (device != NULL && strcmp(name, "device") == 0) {
            *device = value;
            continue;
        }
        int i = find_field(name);
        if (i < 0) {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%s'",
                         type_name, name);
            return -1;
        }
        if (have[i]) {
            PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'",
                         type_name, name);
            return -1;
        }
        if (field_convert(&fields[i], value, &given[i]) < 0)
            return -1;
        have[i] = 1;
    }
    fm_mog2_settings parsed;
    settings_default(&parsed);
    for (int i = 0; i < N_FIELDS; i++)
        if (have[i])
            store(&parsed, &fields[i], given[i]);
    if (parsed.var_min > parsed.var_max)
        return var_order_error(parsed.var_min, parsed.var_max);
    *s = parsed;
    return 0;
}

fm_mog2_params fm_mog2_settings_params(const fm_mog2_settings *s)
{
    fm_mog2_params p;
    p.n_mixtures = s->n_mixtures;
    p.var_threshold = (float)s->var_threshold;
    p.background_ratio = (float)s->background_ratio;
    p.var_threshold_gen = (float)s->var_threshold_gen;
    p.var_init = (float)s->var_init;
    p.var_min = (float)s->var_min;
    p.var_max = (float)s->var_max;
    p.complexity_reduction_threshold = (float)s->complexity_reduction_threshold;
    p.shadow_threshold = (float)s->shadow_threshold;
    p.shadow_value = (unsigned char)s->shadow_value;
    p.detect_shadows = (unsigned char)(s->detect_shadows != 0);
    return p;
}

/* ---- the constructors' signature ------------------------------------------ */

static PyObject *default_repr(const field *f)
{
    switch (f->kind) {
    case FIELD_INT:
        return PyUnicode_FromFormat("%ld", (long)f->fallback);
    case FIELD_BOOL:
        return PyUnicode_FromString(f->fallback != 0 ? "True" : "False");
    default: {
        char *text = PyOS_double_to_string(f->fallback, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
        if (text == NULL)
            return NULL;
        PyObject *s = PyUnicode_FromString(text);
        PyMem_Free(text);
        return s;
    }
    }
}

static PyObject *signature(const char *type_name, const char *extra)
{
    PyObject *parts = PyList_New(0), *sep = NULL, *joined = NULL;
    if (parts == NULL)
        return NULL;
    for (int i = 0; i < N_FIELDS; i++) {
        PyObject *def = default_repr(&fields[i]);
        PyObject *item = def ? PyUnicode_FromFormat("%s%s=%U", i == N_POSITIONAL ? "*, " : "",
                                                    fields[i].name, def)
                             : NULL;
        Py_XDECREF(def);
        if (item == NULL || PyList_Append(parts, item) < 0) {
            Py_XDECREF(item);
            goto done;
        }
        Py_DECREF(item);
    }
    if (extra != NULL) {
        PyObject *item = PyUnicode_FromString(extra);
        if (item == NULL || PyList_Append(parts, item) < 0) {
            Py_XDECREF(item);
            goto done;
        }
        Py_DECREF(item);
    }
    sep = PyUnicode_FromString(", ");
    if (sep != NULL)
        joined = PyUnicode_Join(sep, parts);
done:
    Py_DECREF(parts);
    Py_XDECREF(sep);
    if (joined == NULL)
        return NULL;
    PyObject *sig = PyUnicode_FromFormat("%s(%U)", type_name, joined);
    Py_DECREF(joined);
    return sig;
}

PyTypeObject *fm_mog2_make_type(PyObject *module, PyType_Spec *spec, PyTypeObject *base,
                                const char *extra)
{
    /* The class docstring opens with the signature from the table; the spec's
     * slots are copied with that text in place of Py_tp_doc (it is copied by
     * the runtime, so the buffer may go once the type exists). */
    PyType_Slot slots[16];
    int n = 0;
    const char *body = "";
    for (PyType_Slot *s = spec->slots; s->slot != 0 && n < 15; s++) {
        if (s->slot == Py_tp_doc)
            body = s->pfunc;
        else
            slots[n++] = *s;
    }
    const char *short_name = strrchr(spec->name, '.') + 1;
    PyObject *sig = signature(short_name, extra);
    PyObject *doc = sig ? PyUnicode_FromFormat("%U\n--\n\n%s", sig, body) : NULL;
    Py_XDECREF(sig);
    const char *text = doc ? PyUnicode_AsUTF8(doc) : NULL;
    if (text == NULL) {
        Py_XDECREF(doc);
        return NULL;
    }
    slots[n].slot = Py_tp_doc;
    slots[n++].pfunc = (void *)text;
    slots[n].slot = 0;
    slots[n].pfunc = NULL;
    PyType_Spec copy = *spec;
    copy.slots = slots;
    PyObject *type = PyType_FromModuleAndSpec(module, &copy, (PyObject *)base);
    Py_DECREF(doc);
    return (PyTypeObject *)type;
}

/* ---- the base type ---------------------------------------------------------- */

int fm_mog2_base_init(fm_MOG2Base *self, PyObject *args, PyObject *kwargs,
                      const char *type_name, PyObject **device, fm_mog2_release_fn release)
{
    if (settings_parse(&self->settings, args, kwargs, type_name, device) < 0)
        return -1;
    self->release = release;
    self->lock = PyThread_allocate_lock();
    if (self->lock == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static int base_release(PyObject *op)
{
    fm_mog2_base_fini((fm_MOG2Base *)op);
    return 0;
}

void fm_mog2_dealloc(PyObject *op)
{
    fm_gc_dealloc(op, base_release);
}

void fm_mog2_base_fini(fm_MOG2Base *self)
{
    if (self->release != NULL)
        self->release(self);
    if (self->lock != NULL)
        PyThread_free_lock(self->lock);
    self->lock = NULL;
}

static void lock_wait(PyThread_type_lock lock)
{
    if (PyThread_acquire_lock(lock, NOWAIT_LOCK))
        return;
    Py_BEGIN_ALLOW_THREADS
    PyThread_acquire_lock(lock, WAIT_LOCK);
    Py_END_ALLOW_THREADS
}

int fm_mog2_lock_open(fm_MOG2Base *self)
{
    lock_wait(self->lock);
    /* Checked under the lock: a close() that won the race stays closed. */
    if (self->closed) {
        PyThread_release_lock(self->lock);
        PyErr_SetString(PyExc_ValueError, "the subtractor is closed");
        return -1;
    }
    return 0;
}

void fm_mog2_unlock(fm_MOG2Base *self)
{
    PyThread_release_lock(self->lock);
}

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

int fm_mog2_call_args_parse(fm_state *st, PyObject *args, PyObject *kwargs, int flags,
                            int device, fm_mog2_call_args *a)
{
    /* Indexed by flags: host apply, host apply_batch, GPU apply, GPU apply_batch. */
    static char *kwlists[4][7] = {
        {"", "learning_rate", "fgmask", "known_foreground", "timer", NULL},
        {"", "learning_rate", "fgmasks", "known_foreground", "timer", NULL},
        {"", "learning_rate", "stream", "fgmask", "known_foreground", "timer", NULL},
        {"", "learning_rate", "stream", "fgmasks", "known_foreground", "timer", NULL},
    };
    static const char *formats[4] = {"O|O$OOO:apply", "O|O$OOO:apply_batch",
                                     "O|O$OOOO:apply", "O|O$OOOO:apply_batch"};
    PyObject *rate_arg = NULL, *stream_arg = NULL;
    a->stream = NULL;
    a->fgmasks = a->known = Py_None;
    a->timer = NULL;
    int ok = flags & FM_MOG2_CALL_GPU
        ? PyArg_ParseTupleAndKeywords(args, kwargs, formats[flags], kwlists[flags], &a->frames,
                                      &rate_arg, &stream_arg, &a->fgmasks, &a->known, &a->timer)
        : PyArg_ParseTupleAndKeywords(args, kwargs, formats[flags], kwlists[flags], &a->frames,
                                      &rate_arg, &a->fgmasks, &a->known, &a->timer);
    if (!ok)
        return -1;
    if (flags & FM_MOG2_CALL_GPU) {
        if ((a->stream = fm_require_stream(st, stream_arg, device)) == NULL)
            return -1;
        if (!(flags & FM_MOG2_CALL_BATCH) && a->fgmasks != Py_None
            && fm_gpumat_check_open(st, a->fgmasks, "fgmask") == NULL)
            return -1;
    }
    return fm_mog2_learning_rate_arg(rate_arg, &a->learning_rate);
}

/* The step of one frame after a model built for `had` has seen
 * `frames_seen` frames. */
static void plan_after(const fm_mog2_settings *settings, const fm_mog2_geometry *had,
                       long frames_seen, const fm_image_shape *frame, double learning_rate,
                       fm_mog2_step *step)
{
    fm_mog2_geometry g = {frame->width, frame->height, frame->channels,
                          frame->type_num == NPY_FLOAT32, settings->n_mixtures};
    step->geometry = g;
    step->rebuild = had->width == 0 || had->width != g.width || had->height != g.height
                    || had->channels != g.channels || had->is_float != g.is_float
                    || had->n_mixtures != g.n_mixtures;
    if (step->rebuild)
        frames_seen = 0;
    step->restart = step->rebuild || fm_mog2_needs_reset(frames_seen, learning_rate);
    if (step->restart)
        frames_seen = 0;
    step->frames_seen = frames_seen + 1;
    step->params = fm_mog2_settings_params(settings);
    double rate = fm_mog2_learning_rate(learning_rate, step->frames_seen, settings->history);
    step->rates = fm_mog2_make_rates(&step->params, rate);
}

int fm_mog2_plan(const fm_MOG2Base *self, const fm_image_shape *frame, double learning_rate,
                 fm_mog2_step *step)
{
    plan_after(&self->settings, &self->geometry, self->frames_seen, frame, learning_rate, step);
    return 0;
}

void fm_mog2_plan_frames(const fm_MOG2Base *self, const fm_image_shape *frame,
                         double learning_rate, int count, fm_mog2_step *steps)
{
    for (int k = 0; k < count; ++k) {
        if (k == 0)
            plan_after(&self->settings, &self->geometry, self->frames_seen, frame,
                       learning_rate, &steps[0]);
        else
            plan_after(&self->settings, &steps[k - 1].geometry, steps[k - 1].frames_seen, frame,
                       learning_rate, &steps[k]);
    }
}

void fm_mog2_commit(fm_MOG2Base *self, const fm_mog2_step *step)
{
    self->geometry = step->geometry;
    self->frames_seen = step->frames_seen;
}

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

int fm_mog2_sequences_get(fm_mog2_sequences *seq, PyObject *frames, PyObject *known,
                          PyObject *fgmasks, Py_ssize_t count)
{
    memset(seq, 0, sizeof *seq);
    if ((seq->frames = fm_mog2_items(frames, "frames", count)) == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq->frames);
    if ((known != Py_None && (seq->known = fm_mog2_items(known, "known_foreground", n)) == NULL)
        || (fgmasks != Py_None && (seq->fgmasks = fm_mog2_items(fgmasks, "fgmasks", n)) == NULL)) {
        fm_mog2_sequences_clear(seq);
        return -1;
    }
    seq->count = (int)n;
    return 0;
}

int fm_mog2_call_frames(const fm_mog2_call_args *a, int flags, fm_mog2_sequences *seq)
{
    if (flags & FM_MOG2_CALL_BATCH)
        return fm_mog2_sequences_get(seq, a->frames, a->known, a->fgmasks, -1);
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

int fm_mog2_lock_all(fm_MOG2Base **locking, int count)
{
    for (int k = 0; k < count; ++k) {
        if (fm_mog2_lock_open(locking[k]) < 0) {
            fm_mog2_unlock_all(locking, k);
            return -1;
        }
    }
    return 0;
}

void fm_mog2_unlock_all(fm_MOG2Base **locking, int count)
{
    while (count > 0)
        fm_mog2_unlock(locking[--count]);
}

/* The launch grid has 65535 rows of 8-pixel-tall blocks at most. */
#define FM_MOG2_MAX_HEIGHT (65535 * 8)

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

/* ---- properties and aliases ------------------------------------------------ */

static PyObject *prop_get(PyObject *self, void *closure)
{
    return field_get(&((fm_MOG2Base *)self)->settings, (const field *)closure);
}

static int prop_set(PyObject *self, PyObject *value, void *closure)
{
    return field_set(&((fm_MOG2Base *)self)->settings, (const field *)closure, value);
}

#define ALIAS_FUNCTIONS(i, name, kind, lo, hi, def, Camel, doc)               \
    static PyObject *get##Camel(PyObject *self, PyObject *Py_UNUSED(ignored)) \
    {                                                                          \
        return prop_get(self, (void *)&fields[i]);                             \
    }                                                                          \
    static PyObject *set##Camel(PyObject *self, PyObject *value)               \
    {                                                                          \
        if (prop_set(self, value, (void *)&fields[i]) < 0)                     \
            return NULL;                                                       \
        Py_RETURN_NONE;                                                        \
    }

FM_MOG2_FIELDS(ALIAS_FUNCTIONS)

static PyObject *Base_get_frame_count(PyObject *op, void *Py_UNUSED(closure))
{
    return PyLong_FromLong(((fm_MOG2Base *)op)->frames_seen);
}

static PyObject *Base_get_closed(PyObject *op, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(((fm_MOG2Base *)op)->closed);
}

#define PROP_ENTRY(i, name, kind, lo, hi, def, Camel, doc) \
    {#name, prop_get, prop_set, doc, (void *)&fields[i]},

static PyGetSetDef Base_getset[] = {
    FM_MOG2_FIELDS(PROP_ENTRY)
    {"frame_count", Base_get_frame_count, NULL, "Frames in the current model.", NULL},
    {"closed", Base_get_closed, NULL, "True once close() has run.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyObject *Base_reset(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    fm_MOG2Base *self = (fm_MOG2Base *)op;
    if (fm_mog2_lock_open(self) < 0)
        return NULL;
    self->frames_seen = 0;
    fm_mog2_unlock(self);
    Py_RETURN_NONE;
}

static PyObject *Base_close(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    fm_MOG2Base *self = (fm_MOG2Base *)op;
    lock_wait(self->lock);
    self->closed = 1;
    if (self->release != NULL)
        self->release(self);
    self->geometry.width = 0;
    self->frames_seen = 0;
    PyThread_release_lock(self->lock);
    Py_RETURN_NONE;
}

static PyObject *Base_enter(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    if (((fm_MOG2Base *)op)->closed) {
        PyErr_SetString(PyExc_ValueError, "the subtractor is closed");
        return NULL;
    }
    return Py_NewRef(op);
}

static PyObject *Base_exit(PyObject *op, PyObject *Py_UNUSED(args))
{
    return Base_close(op, NULL);
}

#define ALIAS_METHODS(i, name, kind, lo, hi, def, Camel, doc)                          \
    {"get" #Camel, get##Camel, METH_NOARGS, "OpenCV-style alias: returns " #name "."}, \
    {"set" #Camel, set##Camel, METH_O, "OpenCV-style alias: sets " #name "."},

static PyMethodDef Base_methods[] = {
    FM_MOG2_FIELDS(ALIAS_METHODS)
    {"reset", Base_reset, METH_NOARGS, FM_DOC_BASE_RESET},
    {"clear", Base_reset, METH_NOARGS, "OpenCV-style alias of reset."},
    {"close", Base_close, METH_NOARGS, FM_DOC_BASE_CLOSE},
    {"__enter__", Base_enter, METH_NOARGS, NULL},
    {"__exit__", Base_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static int Base_traverse(PyObject *op, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(op));
    return 0;
}

static PyType_Slot Base_slots[] = {
    {Py_tp_methods, Base_methods},
    {Py_tp_getset, Base_getset},
    {Py_tp_traverse, Base_traverse},
    {Py_tp_doc, (void *)"What both MOG2 subtractors share (internal)."},
    {0, NULL},
};

PyType_Spec fm_mog2_base_spec = {
    .name = "fastmog._MOG2Base",
    .basicsize = sizeof(fm_MOG2Base),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC
             | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = Base_slots,
};

/* ---- the table for Python -------------------------------------------------- */

static PyObject *mog2_parameters(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    PyObject *result = PyTuple_New(N_FIELDS);
    if (result == NULL)
        return NULL;
    for (int i = 0; i < N_FIELDS; i++) {
        const field *f = &fields[i];
        fm_mog2_settings s;
        settings_default(&s);
        PyObject *type = (PyObject *)(f->kind == FIELD_INT ? &PyLong_Type
                                      : f->kind == FIELD_BOOL ? &PyBool_Type : &PyFloat_Type);
        PyObject *def = f->kind == FIELD_FLOAT ? PyFloat_FromDouble(f->fallback)
                                               : field_get(&s, f);
        PyObject *item = def ? Py_BuildValue("{s:s,s:O,s:N,s:d,s:d,s:s,s:O,s:s}", "name", f->name,
                                             "type", type, "default", def, "min", f->lo,
                                             "max", f->hi, "opencv", f->camel, "positional",
                                             i < N_POSITIONAL ? Py_True : Py_False, "doc", f->doc)
                             : NULL;
        if (item == NULL) {
            Py_DECREF(result);
            return NULL;
        }
        PyTuple_SET_ITEM(result, i, item);
    }
    return result;
}

/* The byte count of the timer's records, for tests and the report. */
static PyObject *mog2_bytes(PyObject *Py_UNUSED(module), PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"height", "width", "channels", "is_float", "n_mixtures", "frames",
                             "known", "per_pass", NULL};
    fm_mog2_geometry g;
    int frames = 1, known = 0, per_pass = FM_MOG2_MAX_PASS;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "iiipi|i$ii:_mog2_bytes", kwlist, &g.height,
                                     &g.width, &g.channels, &g.is_float, &g.n_mixtures, &frames,
                                     &known, &per_pass))
        return NULL;
    if (g.height < 0 || g.width < 0 || g.channels < 1 || g.n_mixtures < 1 || frames < 0) {
        PyErr_SetString(PyExc_ValueError, "sizes must be positive");
        return NULL;
    }
    int64_t read, written;
    fm_mog2_bytes(&g, frames, known, per_pass, &read, &written);
    return Py_BuildValue("(LL)", (long long)read, (long long)written);
}

PyMethodDef fm_mog2_base_methods_module[] = {
    {"_mog2_parameters", mog2_parameters, METH_NOARGS, FM_DOC_MOG2_PARAMETERS},
    {"_mog2_bytes", (PyCFunction)(void (*)(void))mog2_bytes, METH_VARARGS | METH_KEYWORDS,
     "_mog2_bytes($module, /, height, width, channels, is_float, n_mixtures, frames=1, *, "
     "known=0, per_pass=16)\n--\n\n(bytes read, bytes written) of one MOG2 call, the "
     "count the timer's records carry."},
    {NULL, NULL, 0, NULL},
};
