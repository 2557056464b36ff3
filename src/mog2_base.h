/* What the GPU and the host subtractor share: the MOG2 parameters as the user
 * sets them (mog2_params.c), the hidden base type that carries them (the
 * lock, frame bookkeeping, close/reset: mog2_base.c) and the verbs'
 * arguments (mog2_args.c). */
#ifndef FASTMOG_MOG2_BASE_H
#define FASTMOG_MOG2_BASE_H

#include "fastmog.h"
#include "mog2_table.h"

#include <pythread.h>

/* Values are kept as OpenCV keeps them: varThreshold as a double, the other
 * thresholds rounded to float when set. Defaults live in the table in
 * mog2_table.h, nowhere else. */
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

/* What a subtractor's model was built for; width == 0 means no model yet. */
typedef struct fm_mog2_geometry {
    int width, height, channels, is_float, n_mixtures;
} fm_mog2_geometry;

typedef struct fm_MOG2Base fm_MOG2Base;

/* Frees the subclass's model and buffers; called with the lock held. */
typedef void (*fm_mog2_release_fn)(fm_MOG2Base *self);

/* The head of both subtractor objects (fastmog._MOG2Base). */
struct fm_MOG2Base {
    PyObject_HEAD
    fm_mog2_settings settings;
    PyThread_type_lock lock;        /* serializes calls; owned */
    long frames_seen;               /* frames since the model (re)started */
    fm_mog2_geometry geometry;      /* what the model was built for */
    int closed;
    fm_mog2_release_fn release;     /* the subclass's model release */
};

extern PyType_Spec fm_mog2_base_spec;

/* ---- mog2_params.c ---- */

/* Parses the constructor's arguments (the first three may be positional, the
 * rest keyword-only; var_min and var_max are checked together at the end).
 * `device` as fm_mog2_base_init's. `s` is unchanged on error. */
int fm_mog2_settings_parse(fm_mog2_settings *s, PyObject *args, PyObject *kwargs,
                           const char *type_name, PyObject **device);
fm_mog2_params fm_mog2_settings_params(const fm_mog2_settings *s);

/* ---- mog2_base.c ---- */

/* Parses the constructor's arguments into `self` and makes its lock.
 * `device` receives the device= argument (borrowed, may be NULL) when not
 * NULL, else device= is refused. */
int fm_mog2_base_init(fm_MOG2Base *self, PyObject *args, PyObject *kwargs,
                      const char *type_name, PyObject **device, fm_mog2_release_fn release);
/* Frees the model and the lock; fm_mog2_dealloc is both types' tp_dealloc. */
void fm_mog2_base_fini(fm_MOG2Base *self);
void fm_mog2_dealloc(PyObject *op);

/* Takes the lock (waiting with the GIL released) and checks the subtractor
 * is open; on failure the lock is not held and an exception is set. */
int fm_mog2_lock_open(fm_MOG2Base *self);
void fm_mog2_unlock(fm_MOG2Base *self);

/* One frame's bookkeeping, decided as OpenCV decides it, before anything is
 * changed; fm_mog2_commit() stores it once the frame's work is queued. */
typedef struct fm_mog2_step {
    fm_mog2_geometry geometry;      /* of this frame */
    int rebuild;                    /* no model, or another geometry: a new one */
    int restart;                    /* the mode counts start from zero */
    long frames_seen;               /* after this frame */
    fm_mog2_params params;
    fm_mog2_rates rates;
} fm_mog2_step;

/* Plans the frame (the rate was checked). Called with the lock held. */
int fm_mog2_plan(const fm_MOG2Base *self, const fm_image_shape *frame, double learning_rate,
                 fm_mog2_step *step);
/* Plans `count` consecutive frames of one shape as that many apply() calls
 * would: steps[0] as fm_mog2_plan does, each later one after the one before
 * (only steps[0] can rebuild). Commit the last. */
void fm_mog2_plan_frames(const fm_MOG2Base *self, const fm_image_shape *frame,
                         double learning_rate, int count, fm_mog2_step *steps);
void fm_mog2_commit(fm_MOG2Base *self, const fm_mog2_step *step);

/* Takes every lock (and checks each is open), or none. */
int fm_mog2_lock_all(fm_MOG2Base **locking, int count);
void fm_mog2_unlock_all(fm_MOG2Base **locking, int count);

/* ---- mog2_args.c ---- */

/* A sequence argument as a tuple of `count` items (count < 0: any length,
 * up to INT_MAX / 2): a list is copied, so another thread changing it while
 * the call has the GIL released cannot drop what the call uses. New
 * reference, or NULL with TypeError / ValueError. */
PyObject *fm_mog2_items(PyObject *arg, const char *name, Py_ssize_t count);

/* The per-frame arguments of apply, apply_batch and apply_cameras: frames,
 * and known_foreground and fgmasks (NULL when not given). Each is a tuple of
 * `count` items (owned), or, for apply's one frame, the argument itself
 * (borrowed: apply allocates nothing for it). Read them with fm_mog2_item. */
typedef struct fm_mog2_sequences {
    PyObject *frames;
    PyObject *known;
    PyObject *fgmasks;
    int count;
    int one;                  /* apply's one frame: its arguments are named
                                 frame, fgmask and known_foreground */
} fm_mog2_sequences;

/* Fills `seq` (zeroed first) from the arguments; count < 0: as many as
 * there are frames. Refuses fgmasks that share an output buffer (one object
 * twice, or numpy arrays over shared bytes; fm_mog2_call_frames compares
 * GpuMats' device bytes too). On failure everything taken is released. */
int fm_mog2_sequences_get(fm_mog2_sequences *seq, PyObject *frames, PyObject *known,
                          PyObject *fgmasks, Py_ssize_t count);
void fm_mog2_sequences_clear(fm_mog2_sequences *seq);

/* Entry k of seq->frames, seq->known or seq->fgmasks (`items`): borrowed,
 * Py_None when not given. */
static inline PyObject *fm_mog2_item(const fm_mog2_sequences *seq, PyObject *items, int k)
{
    if (items == NULL)
        return Py_None;
    return seq->one ? items : PySequence_Fast_GET_ITEM(items, k);
}

/* The index that names entry k in messages: -1 (no index) for apply's one
 * frame. */
static inline int fm_mog2_index(const fm_mog2_sequences *seq, int k)
{
    return seq->one ? -1 : k;
}

/* apply_cameras' subtractors (a tuple from fm_mog2_items) and learning_rate
 * (one number, or one per camera), checked: each of `type`, none twice.
 * Fills cameras[] and rates[] in call order and locking[] in the order the
 * locks are taken (by address: two calls on overlapping sets never wait for
 * each other in a cycle). */
int fm_mog2_camera_args(PyObject *subs, PyTypeObject *type, PyObject *rate_arg,
                        fm_MOG2Base **cameras, double *rates, fm_MOG2Base **locking);

/* What each argument of the subtractors must be. */
fm_image_rule fm_mog2_frame_rule(void);
/* The frames of a batch after the first: its shape and dtype. */
fm_image_rule fm_mog2_batch_frame_rule(const fm_image_shape *first);
fm_image_rule fm_mog2_mask_rule(const fm_image_shape *frame, int writable);
fm_image_rule fm_mog2_background_rule(const fm_mog2_geometry *g);
/* The shape of the background image of a model (uint8 or float32). */
fm_image_shape fm_mog2_background_shape(const fm_mog2_geometry *g);

/* Converts apply()'s learning_rate (NULL: not given, automatic): a finite
 * number, or any negative one meaning automatic; TypeError or ValueError. */
int fm_mog2_learning_rate_arg(PyObject *arg, double *rate);

/* The arguments of apply() and apply_batch(), of both subtractors:
 * `frame, /, learning_rate=-1.0, *, [stream,] fgmask=None,
 * known_foreground=None, timer=None` (apply_batch: frames, fgmasks). Every
 * reference is borrowed from the call's arguments. */
typedef struct fm_mog2_call_args {
    fm_state *st;             /* the module's, for telling GpuMats apart */
    PyObject *frames;         /* apply's frame, or apply_batch's frames */
    fm_Stream *stream;        /* FM_MOG2_CALL_GPU only: checked open, on the device */
    PyObject *fgmasks;        /* fgmask(s), or Py_None */
    PyObject *known;          /* known_foreground, or Py_None */
    PyObject *timer;          /* NULL when not given */
    double learning_rate;     /* converted; -1 (automatic) when not given */
} fm_mog2_call_args;

enum {
    FM_MOG2_CALL_BATCH = 1,   /* apply_batch: frames and fgmasks */
    FM_MOG2_CALL_GPU = 2,     /* the GPU subtractor: a required stream= on `device` */
};

/* Parses and checks them in the order the methods always have: the stream,
 * a GPU apply's fgmask (an open GpuMat), then the learning rate. 0, or -1
 * with TypeError / ValueError. */
int fm_mog2_call_args_parse(fm_state *st, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames, int flags, int device, fm_mog2_call_args *a);
/* The call's frames as sequences: apply_batch's as fm_mog2_sequences_get
 * takes them, apply's one frame as its own arguments (`one` set), so both
 * methods are one path. 0, or -1 with an exception set. */
int fm_mog2_call_frames(const fm_mog2_call_args *a, int flags, fm_mog2_sequences *seq);

/* ---- mog2_snapshot.c ---- */

#define FM_MOG2_SNAPSHOT_FORMAT "fastmog.mog2"
#define FM_MOG2_SNAPSHOT_VERSION 1

/* The snapshot's arrays, in this order: weight, variance, mean, mode_count. */
enum {
    FM_MOG2_SNAP_WEIGHT, FM_MOG2_SNAP_VARIANCE, FM_MOG2_SNAP_MEAN, FM_MOG2_SNAP_MODE_COUNT,
    FM_MOG2_SNAPSHOT_ARRAYS
};

/* A snapshot read and checked: the constructor's keywords, what the model
 * was built for, its clock and its arrays (of the canonical dtypes and
 * shapes, C-contiguous; the mode counts a checked copy). References owned
 * once read: fm_mog2_snapshot_clear releases them. */
typedef struct fm_mog2_snapshot {
    PyObject *parameters;
    fm_mog2_geometry geometry;
    long frames_seen;
    PyArrayObject *arrays[FM_MOG2_SNAPSHOT_ARRAYS];
} fm_mog2_snapshot;

/* New arrays of the canonical dtypes and shapes for `g`, uninitialised; all
 * or none (an exception set). */
int fm_mog2_snapshot_arrays(const fm_mog2_geometry *g, PyObject *arrays[FM_MOG2_SNAPSHOT_ARRAYS]);
void fm_mog2_snapshot_arrays_clear(PyObject *arrays[FM_MOG2_SNAPSHOT_ARRAYS]);
/* The snapshot dict of `self` (its lock held, its model filled into
 * `arrays`, which the dict references): new reference or NULL. */
PyObject *fm_mog2_snapshot_dict(fm_MOG2Base *self, PyObject *arrays[FM_MOG2_SNAPSHOT_ARRAYS]);
/* Reads and checks a snapshot before anything is made: 0, or -1 with
 * TypeError or ValueError naming what is wrong. */
int fm_mog2_snapshot_read(PyObject *snapshot, fm_mog2_snapshot *out);
void fm_mog2_snapshot_clear(fm_mog2_snapshot *s);
/* A new subtractor of `type` with the snapshot's parameters (and device=
 * `device` when not NULL), no model yet. */
PyObject *fm_mog2_snapshot_subtractor(PyTypeObject *type, const fm_mog2_snapshot *s,
                                      PyObject *device);

/* ---- the GPU model's layout (mog2.c) ---- */

/* The GPU's model in one allocation: the tiles of mog2_params.h (the last
 * one padded to FM_MOG2_TILE pixels), then the mode counts on a 256-byte
 * boundary. (The host keeps each pixel's modes together instead:
 * fm_mog2_host_model in mog2_loop.h.) */
static inline size_t fm_mog2_modes_bytes(const fm_mog2_geometry *g)
{
    size_t pixels = (size_t)g->width * (size_t)g->height;
    size_t tiles = (pixels + FM_MOG2_TILE - 1) / FM_MOG2_TILE;
    size_t bytes = tiles * FM_MOG2_TILE_FLOATS((size_t)g->n_mixtures, (size_t)g->channels)
                   * sizeof(float);
    return (bytes + 255) / 256 * 256;
}

static inline size_t fm_mog2_model_bytes(const fm_mog2_geometry *g)
{
    return fm_mog2_modes_bytes(g) + (size_t)g->width * (size_t)g->height;
}

/* ---- mog2_tiles.c ---- */

/* The tiles of a model of geometry `g` (fm_mog2_modes_bytes) into the
 * snapshot's weight, variance and mean planes, and back; fm_mog2_tile leaves
 * the padding lanes of the last tile as they were. */
void fm_mog2_untile(const fm_mog2_geometry *g, const float *tiles, float *weight,
                    float *variance, float *mean);
void fm_mog2_tile(const fm_mog2_geometry *g, const float *weight, const float *variance,
                  const float *mean, float *tiles);

/* The bytes of device (or host) memory one MOG2 call of `frames` frames of
 * geometry `g` moves, by fastmog's own count, the one the timer's records
 * carry: every frame read once (and its known-foreground mask when `known`),
 * every mask written once (`known` of the frames have a known-foreground mask,
 * read once), and the whole model (fm_mog2_model_bytes: means,
 * weights, variances, modes used) read and written once per pass of up to
 * `per_pass` frames (FM_MOG2_MAX_PASS on the GPU). An upper bound for the
 * model: a pixel with fewer modes used reads fewer. */
static inline void fm_mog2_bytes(const fm_mog2_geometry *g, int frames, int known, int per_pass,
                                 int64_t *read, int64_t *written)
{
    int64_t pixels = (int64_t)g->width * g->height;
    int64_t frame = pixels * g->channels * (g->is_float ? 4 : 1);
    int64_t passes = per_pass > 0 ? (frames + per_pass - 1) / per_pass : 1;
    int64_t model = (int64_t)fm_mog2_model_bytes(g) * passes;
    *read = (int64_t)frames * frame + (int64_t)known * pixels + model;
    *written = (int64_t)frames * pixels + model;
}

static inline fm_mog2_model fm_mog2_model_at(void *base, const fm_mog2_geometry *g)
{
    fm_mog2_model m;
    m.modes = (float *)base;
    m.mode_count = (unsigned char *)base + fm_mog2_modes_bytes(g);
    m.width = g->width;
    m.height = g->height;
    m.channels = g->channels;
    m.n_mixtures = g->n_mixtures;
    return m;
}


#endif
