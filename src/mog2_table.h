/* The one table of MOG2 parameters, as an X-macro, and what it generates for
 * the base type: a property and an OpenCV getX/setX pair per parameter. The
 * values, their checks and the functions behind the entries are
 * mog2_params.c's. Included through mog2_base.h. */
#ifndef FASTMOG_MOG2_TABLE_H
#define FASTMOG_MOG2_TABLE_H

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

/* A property of _MOG2Base; `closure` is the parameter's index in the table. */
PyObject *fm_mog2_param_get(PyObject *self, void *closure);
int fm_mog2_param_set(PyObject *self, PyObject *value, void *closure);

#define FM_MOG2_ALIAS_DECLARE(i, name, kind, lo, hi, def, Camel, doc)        \
    PyObject *fm_mog2_get##Camel(PyObject *self, PyObject *ignored);         \
    PyObject *fm_mog2_set##Camel(PyObject *self, PyObject *value);
FM_MOG2_FIELDS(FM_MOG2_ALIAS_DECLARE)

/* Entries of _MOG2Base's getset and method tables. */
#define FM_MOG2_PROPERTY(i, name, kind, lo, hi, def, Camel, doc) \
    {#name, fm_mog2_param_get, fm_mog2_param_set, doc, (void *)(intptr_t)(i)},

#define FM_MOG2_ALIASES(i, name, kind, lo, hi, def, Camel, doc)                                \
    {"get" #Camel, fm_mog2_get##Camel, METH_NOARGS, "OpenCV-style alias: returns " #name "."}, \
    {"set" #Camel, fm_mog2_set##Camel, METH_O, "OpenCV-style alias: sets " #name "."},

#endif
