/* MOG2 parameters as the user sets them, shared by the GPU subtractor
 * (mog2.c) and the host reference (mog2_host.c): validation, properties,
 * OpenCV-style getX/setX aliases and the per-frame bookkeeping. */
#ifndef FASTMOG_MOG2_SETTINGS_H
#define FASTMOG_MOG2_SETTINGS_H

#include "fastmog.h"

/* Values are kept as OpenCV keeps them: varThreshold as a double, the other
 * thresholds rounded to float when set. */
typedef struct fm_mog2_settings {
    int history;
    int n_mixtures;
    int detect_shadows;
    int shadow_value;
    double var_threshold;
    double background_ratio;
    double var_threshold_gen;
    double var_init;
    double var_min;
    double var_max;
    double complexity_reduction_threshold;
    double shadow_threshold;
} fm_mog2_settings;

/* Both subtractor types start with this prefix. */
typedef struct fm_mog2_object {
    PyObject_HEAD
    fm_mog2_settings settings;
} fm_mog2_object;

/* What a subtractor's model was built for; width == 0 means no model yet. */
typedef struct fm_mog2_geometry {
    int width, height, channels, is_float, n_mixtures;
} fm_mog2_geometry;

void fm_mog2_settings_default(fm_mog2_settings *s);

/* Parses the constructor's arguments (history, var_threshold, detect_shadows
 * and the keyword-only rest) into `s`; `device` receives the device= argument
 * (borrowed, may be NULL) when not NULL, else device= is refused. */
int fm_mog2_settings_parse(fm_mog2_settings *s, PyObject *args, PyObject *kwargs,
                           const char *type_name, PyObject **device);

fm_mog2_params fm_mog2_settings_params(const fm_mog2_settings *s);

/* The learning rate for the next frame and whether the model restarts, as
 * OpenCV decides them. `frames_seen` is the count before this frame. */
int fm_mog2_check_learning_rate(double requested);

extern PyGetSetDef fm_mog2_getset[];
extern PyMethodDef fm_mog2_alias_methods[];

/* Gives a subtractor type (whose objects start like fm_mog2_object) the
 * parameter properties and their OpenCV-style aliases. */
int fm_mog2_add_settings(PyTypeObject *type);

/* 1 if a frame of this geometry needs a new model. */
static inline int fm_mog2_geometry_changed(const fm_mog2_geometry *g, int width, int height,
                                           int channels, int is_float, int n_mixtures)
{
    return g->width != width || g->height != height || g->channels != channels
           || g->is_float != is_float || g->n_mixtures != n_mixtures;
}

/* A lock serializing calls on one subtractor; waits with the GIL released. */
int fm_lock_acquire(PyThread_type_lock lock);

#endif
