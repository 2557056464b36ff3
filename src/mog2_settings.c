/* MOG2 parameters: one table drives validation, properties and aliases. */
#include "mog2_settings.h"

#include <math.h>
#include <pythread.h>

enum field_kind { FIELD_INT, FIELD_BOOL, FIELD_DOUBLE, FIELD_FLOAT };

typedef struct field {
    const char *name;        /* property and keyword */
    enum field_kind kind;
    size_t offset;           /* in fm_mog2_settings */
    double lo, hi;           /* inclusive range */
    const char *doc;
} field;

/* The one table: index, name, kind, range, OpenCV's CamelCase name, doc. */
#define FM_MOG2_FIELDS(X)                                                            \
    X(0, history, FIELD_INT, 1, INT32_MAX, History,                                   \
      "Frames that shape the model; the automatic learning rate ends at 1/history.")  \
    X(1, var_threshold, FIELD_DOUBLE, 0, HUGE_VAL, VarThreshold,                      \
      "Squared Mahalanobis distance under which a pixel is background (Tb).")         \
    X(2, detect_shadows, FIELD_BOOL, 0, 1, DetectShadows,                             \
      "Mark shadows with shadow_value instead of 255.")                               \
    X(3, n_mixtures, FIELD_INT, 1, FM_MOG2_MAX_MIXTURES, NMixtures,            \
      "Gaussian modes per pixel (1 to 8). A change restarts the model.")              \
    X(4, background_ratio, FIELD_FLOAT, 0, 1, BackgroundRatio,                        \
      "Share of the weight that the background modes hold (TB).")                     \
    X(5, var_threshold_gen, FIELD_FLOAT, 0, HUGE_VAL, VarThresholdGen,                \
      "Squared distance under which a sample updates a mode, else a new one (Tg).")   \
    X(6, var_init, FIELD_FLOAT, 0, HUGE_VAL, VarInit, "Variance of a new mode.")      \
    X(7, var_min, FIELD_FLOAT, 0, HUGE_VAL, VarMin, "Smallest variance of a mode.")   \
    X(8, var_max, FIELD_FLOAT, 0, HUGE_VAL, VarMax, "Largest variance of a mode.")    \
    X(9, complexity_reduction_threshold, FIELD_FLOAT, 0, 1,                           \
      ComplexityReductionThreshold, "Prior that prunes weak modes (cT); 0 keeps all.") \
    X(10, shadow_value, FIELD_INT, 0, 255, ShadowValue, "Mask value of shadows.")     \
    X(11, shadow_threshold, FIELD_FLOAT, 0, 1, ShadowThreshold,                       \
      "How much darker than the background a shadow may be (tau).")

#define FIELD_ENTRY(i, name, kind, lo, hi, Camel, doc) \
    {#name, kind, offsetof(fm_mog2_settings, name), lo, hi, doc},

static const field fields[] = {FM_MOG2_FIELDS(FIELD_ENTRY)};
#define N_FIELDS ((int)(sizeof fields / sizeof fields[0]))

void fm_mog2_settings_default(fm_mog2_settings *s)
{
    s->history = FM_MOG2_DEFAULT_HISTORY;
    s->n_mixtures = FM_MOG2_DEFAULT_N_MIXTURES;
    s->detect_shadows = 1;
    s->shadow_value = FM_MOG2_DEFAULT_SHADOW_VALUE;
    s->var_threshold = FM_MOG2_DEFAULT_VAR_THRESHOLD;
    s->background_ratio = FM_MOG2_DEFAULT_BACKGROUND_RATIO;
    s->var_threshold_gen = FM_MOG2_DEFAULT_VAR_THRESHOLD_GEN;
    s->var_init = FM_MOG2_DEFAULT_VAR_INIT;
    s->var_min = FM_MOG2_DEFAULT_VAR_MIN;
    s->var_max = FM_MOG2_DEFAULT_VAR_MAX;
    s->complexity_reduction_threshold = FM_MOG2_DEFAULT_CT;
    s->shadow_threshold = FM_MOG2_DEFAULT_SHADOW_THRESHOLD;
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

static PyObject *field_get(const fm_mog2_settings *s, const field *f)
{
    const char *at = (const char *)s + f->offset;
    switch (f->kind) {
    case FIELD_INT:
        return PyLong_FromLong(*(const int *)at);
    case FIELD_BOOL:
        return PyBool_FromLong(*(const int *)at);
    default:
        return PyFloat_FromDouble(*(const double *)at);
    }
}

/* Validates `value` for `f` and stores it; leaves `s` unchanged on error. */
static int field_set(fm_mog2_settings *s, const field *f, PyObject *value)
{
    char *at = (char *)s + f->offset;
    if (value == NULL) {
        PyErr_Format(PyExc_AttributeError, "cannot delete %s", f->name);
        return -1;
    }
    if (f->kind == FIELD_BOOL) {
        int b = PyObject_IsTrue(value);
        if (b < 0)
            return -1;
        *(int *)at = b;
        return 0;
    }
    if (f->kind == FIELD_INT) {
        if (!PyLong_Check(value) || PyBool_Check(value)) {
            PyErr_Format(PyExc_TypeError, "%s must be an int, not %.200s", f->name,
                         Py_TYPE(value)->tp_name);
            return -1;
        }
        long long v = PyLong_AsLongLong(value);
        if (v == -1 && PyErr_Occurred())
            PyErr_Clear();
        else if (v >= f->lo && v <= f->hi) {
            *(int *)at = (int)v;
            return 0;
        }
        PyErr_Format(PyExc_ValueError, "%s must be an int from %lld to %lld, got %R", f->name,
                     (long long)f->lo, (long long)f->hi, value);
        return -1;
    }
    double v = PyFloat_AsDouble(value);
    if (v == -1.0 && PyErr_Occurred()) {
        PyErr_Format(PyExc_TypeError, "%s must be a number, not %.200s", f->name,
                     Py_TYPE(value)->tp_name);
        return -1;
    }
    if (f->kind == FIELD_FLOAT)
        v = (double)(float)v;  /* OpenCV stores these as float */
    if (!isfinite(v) || v < f->lo || v > f->hi) {
        PyObject *lo = PyFloat_FromDouble(f->lo), *hi = PyFloat_FromDouble(f->hi);
        if (lo != NULL && hi != NULL) {
            if (f->hi == HUGE_VAL)
                PyErr_Format(PyExc_ValueError, "%s must be a finite number >= %R, got %R",
                             f->name, lo, value);
            else
                PyErr_Format(PyExc_ValueError, "%s must be a number from %R to %R, got %R",
                             f->name, lo, hi, value);
        }
        Py_XDECREF(lo);
        Py_XDECREF(hi);
        return -1;
    }
    double old = *(double *)at;
    *(double *)at = v;
    if (s->var_min > s->var_max) {
        *(double *)at = old;
        return var_order_error(v == s->var_min ? v : s->var_min, v == s->var_min ? s->var_max : v);
    }
    return 0;
}

int fm_mog2_settings_parse(fm_mog2_settings *s, PyObject *args, PyObject *kwargs,
                           const char *type_name, PyObject **device)
{
    static const int n_positional = 3;  /* history, var_threshold, detect_shadows */
    fm_mog2_settings parsed;
    fm_mog2_settings_default(&parsed);
    Py_ssize_t nargs = PyTuple_GET_SIZE(args);
    if (nargs > n_positional) {
        PyErr_Format(PyExc_TypeError,
                     "%s() takes at most %d positional arguments (history, var_threshold, "
                     "detect_shadows), %zd given", type_name, n_positional, nargs);
        return -1;
    }
    const int positional_fields[3] = {0, 1, 2};
    for (Py_ssize_t i = 0; i < nargs; i++)
        if (field_set(&parsed, &fields[positional_fields[i]], PyTuple_GET_ITEM(args, i)) < 0)
            return -1;
    if (device != NULL)
        *device = NULL;
    if (kwargs != NULL) {
        PyObject *key, *value;
        Py_ssize_t pos = 0;
        /* var_min/var_max are checked together once both are known. */
        double var_min = parsed.var_min, var_max = parsed.var_max;
        int have_min = 0, have_max = 0;
        while (PyDict_Next(kwargs, &pos, &key, &value)) {
            const char *name = PyUnicode_AsUTF8(key);
            if (name == NULL)
                return -1;
            if (device != NULL && strcmp(name, "device") == 0) {
                *device = value;
                continue;
            }
            int found = -1;
            for (int i = 0; i < N_FIELDS; i++)
                if (strcmp(fields[i].name, name) == 0)
                    found = i;
            if (found < 0) {
                PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%s'",
                             type_name, name);
                return -1;
            }
            if (found < nargs) {
                PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'",
                             type_name, name);
                return -1;
            }
            /* set min and max on a scratch copy without the cross-check */
            if (fields[found].offset == offsetof(fm_mog2_settings, var_min)
                || fields[found].offset == offsetof(fm_mog2_settings, var_max)) {
                fm_mog2_settings scratch = parsed;
                scratch.var_min = 0.0;
                scratch.var_max = HUGE_VAL;
                if (field_set(&scratch, &fields[found], value) < 0)
                    return -1;
                if (fields[found].offset == offsetof(fm_mog2_settings, var_min)) {
                    var_min = scratch.var_min;
                    have_min = 1;
                }
                else {
                    var_max = scratch.var_max;
                    have_max = 1;
                }
                continue;
            }
            if (field_set(&parsed, &fields[found], value) < 0)
                return -1;
        }
        if ((have_min || have_max) && var_min > var_max)
            return var_order_error(var_min, var_max);
        parsed.var_min = var_min;
        parsed.var_max = var_max;
    }
    *s = parsed;
    return 0;
}

/* ---- properties ---------------------------------------------------------- */

static PyObject *prop_get(PyObject *self, void *closure)
{
    return field_get(&((fm_mog2_object *)self)->settings, (const field *)closure);
}

static int prop_set(PyObject *self, PyObject *value, void *closure)
{
    return field_set(&((fm_mog2_object *)self)->settings, (const field *)closure, value);
}

#define PROP_ENTRY(i, name, kind, lo, hi, Camel, doc) \
    {#name, prop_get, prop_set, doc, (void *)&fields[i]},

PyGetSetDef fm_mog2_getset[] = {
    FM_MOG2_FIELDS(PROP_ENTRY)
    {NULL, NULL, NULL, NULL, NULL},
};

/* ---- OpenCV aliases ---------------------------------------------------- */

#define ALIAS_FUNCTIONS(i, name, kind, lo, hi, Camel, doc)                    \
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

#define ALIAS_METHODS(i, name, kind, lo, hi, Camel, doc)                               \
    {"get" #Camel, get##Camel, METH_NOARGS, "OpenCV-style alias: returns " #name "."}, \
    {"set" #Camel, set##Camel, METH_O, "OpenCV-style alias: sets " #name "."},

PyMethodDef fm_mog2_alias_methods[] = {
    FM_MOG2_FIELDS(ALIAS_METHODS)
    {NULL, NULL, 0, NULL},
};

int fm_mog2_check_learning_rate(double requested)
{
    if (isnan(requested)) {
        PyErr_SetString(PyExc_ValueError,
                        "learning_rate must be a number (negative: automatic), got nan");
        return -1;
    }
    return 0;
}

int fm_lock_acquire(PyThread_type_lock lock)
{
    if (PyThread_acquire_lock(lock, NOWAIT_LOCK))
        return 0;
    Py_BEGIN_ALLOW_THREADS
    PyThread_acquire_lock(lock, WAIT_LOCK);
    Py_END_ALLOW_THREADS
    return 0;
}

int fm_mog2_add_settings(PyTypeObject *type)
{
    for (PyGetSetDef *g = fm_mog2_getset; g->name != NULL; g++) {
        PyObject *descr = PyDescr_NewGetSet(type, g);
        if (descr == NULL || PyDict_SetItemString(type->tp_dict, g->name, descr) < 0) {
            Py_XDECREF(descr);
            return -1;
        }
        Py_DECREF(descr);
    }
    for (PyMethodDef *m = fm_mog2_alias_methods; m->ml_name != NULL; m++) {
        PyObject *descr = PyDescr_NewMethod(type, m);
        if (descr == NULL || PyDict_SetItemString(type->tp_dict, m->ml_name, descr) < 0) {
            Py_XDECREF(descr);
            return -1;
        }
        Py_DECREF(descr);
    }
    PyType_Modified(type);
    return 0;
}
