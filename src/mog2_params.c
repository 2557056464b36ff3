/* The MOG2 parameters: one table (mog2_table.h) drives validation, defaults,
 * the properties and OpenCV aliases of _MOG2Base, the constructors' signature
 * and the main job's options (fastmog._mog2_parameters). */
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

/* `value` through __index__ as a long long; *overflow set where it does not
 * fit. -1 with an exception on failure. */
static int index_value(PyObject *value, long long *v, int *overflow)
{
    PyObject *n = PyNumber_Index(value);
    if (n == NULL)
        return -1;
    *v = PyLong_AsLongLongAndOverflow(n, overflow);
    Py_DECREF(n);
    return *v == -1 && PyErr_Occurred() ? -1 : 0;
}

/* Converts `value` for `f`, refusing what the field cannot hold. */
static int field_convert(const field *f, PyObject *value, double *out)
{
    if (value == NULL) {
        PyErr_Format(PyExc_AttributeError, "cannot delete %s", f->name);
        return -1;
    }
    /* Python's and numpy's bools are flags, never numbers here; numpy's
     * integer and float scalars are numbers (through __index__, __float__). */
    int is_bool = PyBool_Check(value) || PyArray_IsScalar(value, Bool);
    if (f->kind == FIELD_BOOL) {
        if (is_bool) {
            int b = PyObject_IsTrue(value);
            if (b < 0)
                return -1;
            *out = b;
            return 0;
        }
        if (!PyIndex_Check(value)) {
            PyErr_Format(PyExc_TypeError, "%s must be True or False, not %.200s", f->name,
                         Py_TYPE(value)->tp_name);
            return -1;
        }
        long long v;
        int overflow;
        if (index_value(value, &v, &overflow) < 0)
            return -1;
        if (overflow || (v != 0 && v != 1)) {
            PyErr_Format(PyExc_ValueError, "%s must be True or False (or 0 or 1), got %R",
                         f->name, value);
            return -1;
        }
        *out = (double)v;
        return 0;
    }
    if (f->kind == FIELD_INT) {
        if (is_bool || !PyIndex_Check(value)) {
            PyErr_Format(PyExc_TypeError, "%s must be an int, not %.200s", f->name,
                         Py_TYPE(value)->tp_name);
            return -1;
        }
        long long v;
        int overflow;
        if (index_value(value, &v, &overflow) < 0)
            return -1;
        if (overflow || v < f->lo || v > f->hi)
            return range_error(f, value);
        *out = (double)v;
        return 0;
    }
    if (is_bool || !(PyFloat_Check(value) || PyIndex_Check(value)
                     || PyArray_IsScalar(value, Floating))) {
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
int fm_mog2_settings_parse(fm_mog2_settings *s, PyObject *args, PyObject *kwargs,
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

/* ---- properties and aliases ------------------------------------------------ */

/* `closure` is the parameter's index in the table. */
PyObject *fm_mog2_param_get(PyObject *self, void *closure)
{
    return field_get(&((fm_MOG2Base *)self)->settings, &fields[(intptr_t)closure]);
}

int fm_mog2_param_set(PyObject *self, PyObject *value, void *closure)
{
    return field_set(&((fm_MOG2Base *)self)->settings, &fields[(intptr_t)closure], value);
}

#define ALIAS_FUNCTIONS(i, name, kind, lo, hi, def, Camel, doc)                    \
    PyObject *fm_mog2_get##Camel(PyObject *self, PyObject *Py_UNUSED(ignored))     \
    {                                                                               \
        return fm_mog2_param_get(self, (void *)(intptr_t)(i));                      \
    }                                                                               \
    PyObject *fm_mog2_set##Camel(PyObject *self, PyObject *value)                   \
    {                                                                               \
        if (fm_mog2_param_set(self, value, (void *)(intptr_t)(i)) < 0)              \
            return NULL;                                                            \
        Py_RETURN_NONE;                                                             \
    }

FM_MOG2_FIELDS(ALIAS_FUNCTIONS)

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

PyMethodDef fm_mog2_params_methods[] = {
    {"_mog2_parameters", mog2_parameters, METH_NOARGS, FM_DOC_MOG2_PARAMETERS},
    {"_mog2_bytes", (PyCFunction)(void (*)(void))mog2_bytes, METH_VARARGS | METH_KEYWORDS,
     "_mog2_bytes($module, /, height, width, channels, is_float, n_mixtures, frames=1, *, "
     "known=0, per_pass=16)\n--\n\n(bytes read, bytes written) of one MOG2 call, the "
     "count the timer's records carry."},
    {NULL, NULL, 0, NULL},
};
