/* fastmog.cpu.BackgroundSubtractorMOG2: the same algorithm on the host, from
 * the same per-pixel code (cuda/mog2_pixel.h, looped over by mog2_loop.c). It
 * is the tests' oracle and lets the main job run where there is no GPU. */
#include "mog2_base.h"
#include "docstrings.h"
#include "mog2_loop.h"

typedef struct fm_MOG2Cpu {
    fm_MOG2Base base;
    void *model;                    /* the layout of fm_mog2_host_model_at; owned, PyMem_Raw */
} fm_MOG2Cpu;

static void release_model(fm_MOG2Base *base)
{
    fm_MOG2Cpu *self = (fm_MOG2Cpu *)base;
    PyMem_RawFree(self->model);
    self->model = NULL;
}

static PyObject *MOG2Cpu_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    fm_MOG2Cpu *self = (fm_MOG2Cpu *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    if (fm_mog2_base_init(&self->base, args, kwargs, "BackgroundSubtractorMOG2", NULL,
                          release_model) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static fm_mog2_host_model host_model(fm_MOG2Cpu *self, const fm_mog2_geometry *g)
{
    return fm_mog2_host_model_at(self->model, g->width, g->height, g->channels, g->n_mixtures);
}

/* A new zeroed model for `g`; the subtractor then holds a fresh model that
 * has seen nothing (consistent even if the call fails later). */
static int rebuild_model(fm_MOG2Cpu *self, const fm_mog2_geometry *g)
{
    void *model = PyMem_RawCalloc(1, fm_mog2_host_model_bytes(g->width, g->height, g->channels,
                                                               g->n_mixtures));
    if (model == NULL) {
        PyErr_Format(PyExc_MemoryError, "cannot allocate a %dx%dx%d MOG2 model", g->height,
                     g->width, g->channels);
        return -1;
    }
    release_model(&self->base);
    self->model = model;
    self->base.geometry = *g;
    self->base.frames_seen = 0;
    return 0;
}

/* Frame `index` of a call (< 0: the call's only frame) and its known
 * foreground (None: none), checked against the frame rule or, after the
 * first, against `first`; io->frame and io->known point into them. */
static int check_frame(PyObject *frame_arg, PyObject *known_arg, int index,
                       const fm_image_shape *first, fm_host_image *frame, fm_mog2_frame_io *io)
{
    char name[48], known_name[64];
    snprintf(name, sizeof name, index < 0 ? "frame" : "frames[%d]", index);
    snprintf(known_name, sizeof known_name,
             index < 0 ? "known_foreground" : "known_foreground[%d]", index);
    fm_image_rule rule = first != NULL ? fm_mog2_batch_frame_rule(first) : fm_mog2_frame_rule();
    if (fm_host_image_check(frame_arg, name, &rule, frame) < 0)
        return -1;
    io->frame = frame->data;
    io->frame_pitch = frame->pitch;
    io->known = NULL;
    io->known_pitch = 0;
    if (known_arg != Py_None) {
        fm_host_image known;
        fm_image_rule mask_rule = fm_mog2_mask_rule(&frame->shape, 0);
        if (fm_host_image_check(known_arg, known_name, &mask_rule, &known) < 0)
            return -1;
        io->known = (const unsigned char *)known.data;
        io->known_pitch = known.pitch;
    }
    return 0;
}

/* A caller's mask for a frame of `shape`: the argument fgmasks[index], or
 * fgmask when index < 0; io->mask points into it. */
static int check_mask(PyObject *arg, int index, const fm_image_shape *shape,
                      fm_mog2_frame_io *io)
{
    char name[32];
    snprintf(name, sizeof name, index < 0 ? "fgmask" : "fgmasks[%d]", index);
    fm_host_image mask;
    fm_image_rule rule = fm_mog2_mask_rule(shape, 1);
    if (fm_host_image_check(arg, name, &rule, &mask) < 0)
        return -1;
    io->mask = (unsigned char *)mask.data;
    io->mask_pitch = mask.pitch;
    return 0;
}

/* A new C-contiguous uint8 array of `count` masks (count 0: one H x W mask)
 * for frames of `shape`; io[k].mask points to mask k. */
static PyObject *new_masks(const fm_image_shape *shape, int count, fm_mog2_frame_io *io)
{
    npy_intp dims[3] = {count, shape->height, shape->width};
    PyObject *masks = count == 0 ? PyArray_SimpleNew(2, dims + 1, NPY_UINT8)
                                 : PyArray_SimpleNew(3, dims, NPY_UINT8);
    if (masks == NULL)
        return NULL;
    char *data = PyArray_DATA((PyArrayObject *)masks);
    for (int k = 0; k < (count == 0 ? 1 : count); ++k) {
        io[k].mask = (unsigned char *)data + (size_t)k * shape->height * shape->width;
        io[k].mask_pitch = (size_t)shape->width;
    }
    return masks;
}

/* Runs `count` planned frames of one geometry through the model with the
 * GIL released, and commits them. The lock is held. */
static int run_frames(fm_MOG2Cpu *self, const fm_mog2_step *steps, fm_mog2_frame_io *io,
                      int count)
{
    if (steps[0].rebuild && rebuild_model(self, &steps[0].geometry) < 0)
        return -1;
    for (int k = 0; k < count; ++k) {
        io[k].rates = steps[k].rates;
        io[k].restart = steps[k].restart;
    }
    fm_mog2_host_model model = host_model(self, &steps[0].geometry);
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = fm_mog2_cpu_apply(&steps[0].params, &model, steps[0].geometry.is_float, io, count);
    Py_END_ALLOW_THREADS
    if (rc != FM_MOG2_OK) {
        PyErr_SetString(PyExc_ValueError, "MOG2 refused the frame or parameters");
        return -1;
    }
    fm_mog2_commit(&self->base, &steps[count - 1]);
    return 0;
}

/* What apply and apply_batch do once their `count` frames (of `shape`) and
 * masks are checked: the timed call, planning under the lock, the run.
 * Takes the reference to `masks`, the result, and returns it, or NULL. */
static PyObject *timed_apply(fm_state *st, fm_MOG2Cpu *self, const char *name, PyObject *timer,
                             const fm_image_shape *shape, double learning_rate, int count,
                             fm_mog2_step *steps, fm_mog2_frame_io *io, PyObject *masks)
{
    fm_call call;
    if (fm_call_begin(st, &call, name, NULL, timer, NULL, shape->height * count, shape->width,
                      shape->channels) < 0) {
        Py_DECREF(masks);
        return NULL;
    }
    int rc = fm_mog2_lock_open(&self->base);
    if (rc == 0) {
        fm_mog2_plan_frames(&self->base, shape, learning_rate, count, steps);
        rc = run_frames(self, steps, io, count);
        fm_mog2_unlock(&self->base);
    }
    if (rc == 0) {
        int known = 0;
        for (int k = 0; k < count; ++k)
            known += io[k].known != NULL;
        int64_t read, written;
        fm_mog2_bytes(&steps[0].geometry, count, known, FM_MOG2_MAX_PASS, &read, &written);
        fm_call_bytes(&call, read, written);
    }
    if (rc < 0)
        Py_CLEAR(masks);
    return fm_call_end(st, &call, masks);
}

/* apply() and apply_batch(): one path, apply's frame being a batch of one
 * whose arguments are named frame and fgmask and whose result is one
 * H x W mask. */
static PyObject *apply_frames(PyObject *op, PyObject *const *args, Py_ssize_t nargs,
                                 PyObject *kwnames, int batch)
{
    fm_MOG2Cpu *self = (fm_MOG2Cpu *)op;
    fm_state *st = fm_state_of(op);
    const int flags = batch ? FM_MOG2_CALL_BATCH : 0;
    PyObject *masks = NULL;
    fm_mog2_call_args a;
    fm_mog2_sequences seq;
    fm_mog2_frame_io one_io, *io = &one_io;
    fm_mog2_step one_step, *steps = &one_step;   /* apply allocates only its mask */
    fm_host_image first, frame;

    if (fm_mog2_call_args_parse(st, args, nargs, kwnames, flags, -1, &a) < 0
        || fm_mog2_call_frames(&a, flags, &seq) < 0)
        return NULL;
    const int count = seq.count;
    memset(&one_io, 0, sizeof one_io);
    if (count != 1) {
        io = PyMem_Calloc((size_t)count + 1, sizeof *io);
        steps = PyMem_Calloc((size_t)count + 1, sizeof *steps);
    }
    if (io == NULL || steps == NULL) {
        PyErr_NoMemory();
        goto out;
    }
    for (int k = 0; k < count; ++k) {
        if (check_frame(fm_mog2_item(&seq, seq.frames, k), fm_mog2_item(&seq, seq.known, k),
                        fm_mog2_index(&seq, k), k == 0 ? NULL : &first.shape,
                        k == 0 ? &first : &frame, &io[k]) < 0)
            goto out;
    }
    if (count == 0) {
        masks = a.fgmasks != Py_None ? Py_NewRef(a.fgmasks) : PyTuple_New(0);
        goto out;
    }
    if (seq.fgmasks != NULL) {
        for (int k = 0; k < count; ++k)
            if (check_mask(fm_mog2_item(&seq, seq.fgmasks, k), fm_mog2_index(&seq, k),
                           &first.shape, &io[k]) < 0)
                goto out;
        masks = Py_NewRef(a.fgmasks);
    }
    else if ((masks = new_masks(&first.shape, batch ? count : 0, io)) == NULL) {
        goto out;
    }
    masks = timed_apply(st, self, batch ? "cpu.BackgroundSubtractorMOG2.apply_batch"
                                        : "cpu.BackgroundSubtractorMOG2.apply",
                        a.timer, &first.shape, a.learning_rate, count, steps, io, masks);
out:
    if (io != &one_io)
        PyMem_Free(io);
    if (steps != &one_step)
        PyMem_Free(steps);
    fm_mog2_sequences_clear(&seq);
    return masks;
}

static PyObject *MOG2Cpu_apply(PyObject *op, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames)
{
    return apply_frames(op, args, nargs, kwnames, 0);
}

static PyObject *MOG2Cpu_apply_batch(PyObject *op, PyObject *const *args, Py_ssize_t nargs,
                                      PyObject *kwnames)
{
    return apply_frames(op, args, nargs, kwnames, 1);
}

static PyObject *cpu_apply_cameras(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"", "", "learning_rate", "fgmasks", "known_foreground", NULL};
    fm_state *st = fm_state_of_module(module);
    PyObject *subs_arg, *frames_arg, *rate_arg = NULL, *fgmasks_arg = Py_None;
    PyObject *known_arg = Py_None, *subs = NULL, *result = NULL;
    fm_mog2_sequences seq = {NULL, NULL, NULL, 0, 0};
    fm_MOG2Base **bases = NULL;     /* [0, n): call order; [n, 2n): lock order */
    double *rates = NULL;
    fm_mog2_frame_io *io = NULL;
    fm_mog2_step *steps = NULL;
    fm_image_shape *shapes = NULL;
    fm_host_image frame;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|O$OO:apply_cameras", kwlist, &subs_arg,
                                     &frames_arg, &rate_arg, &fgmasks_arg, &known_arg)
        || (subs = fm_mog2_items(subs_arg, "subtractors", -1)) == NULL)
        return NULL;
    const int count = (int)PySequence_Fast_GET_SIZE(subs);
    if (fm_mog2_sequences_get(&seq, frames_arg, known_arg, fgmasks_arg, count) < 0)
        goto out;
    bases = PyMem_Calloc(2 * (size_t)count + 1, sizeof *bases);
    rates = PyMem_Calloc((size_t)count + 1, sizeof *rates);
    io = PyMem_Calloc((size_t)count + 1, sizeof *io);
    steps = PyMem_Calloc((size_t)count + 1, sizeof *steps);
    shapes = PyMem_Calloc((size_t)count + 1, sizeof *shapes);
    if (bases == NULL || rates == NULL || io == NULL || steps == NULL || shapes == NULL) {
        PyErr_NoMemory();
        goto out;
    }
    if (fm_mog2_camera_args(subs, st->MOG2Cpu_type, rate_arg, bases, rates, bases + count) < 0
        || (result = PyList_New(count)) == NULL)
        goto out;
    /* every argument is checked before any model changes */
    for (int k = 0; k < count; ++k) {
        PyObject *mask;
        if (check_frame(fm_mog2_item(&seq, seq.frames, k), fm_mog2_item(&seq, seq.known, k), k,
                        NULL, &frame, &io[k]) < 0)
            goto error;
        if (seq.fgmasks != NULL) {
            mask = fm_mog2_item(&seq, seq.fgmasks, k);
            if (check_mask(mask, k, &frame.shape, &io[k]) < 0)
                goto error;
            Py_INCREF(mask);
        }
        else if ((mask = new_masks(&frame.shape, 0, &io[k])) == NULL) {
            goto error;
        }
        PyList_SET_ITEM(result, k, mask);
        shapes[k] = frame.shape;
    }
    if (fm_mog2_lock_all(bases + count, count) < 0)
        goto error;
    int rc = 0;
    for (int k = 0; k < count && rc == 0; ++k) {
        fm_MOG2Cpu *sub = (fm_MOG2Cpu *)bases[k];
        fm_mog2_plan(&sub->base, &shapes[k], rates[k], &steps[k]);
        rc = run_frames(sub, &steps[k], &io[k], 1);
    }
    fm_mog2_unlock_all(bases + count, count);
    if (rc == 0)
        goto out;
error:
    Py_CLEAR(result);
out:
    PyMem_Free(bases);
    PyMem_Free(rates);
    PyMem_Free(io);
    PyMem_Free(steps);
    PyMem_Free(shapes);
    Py_DECREF(subs);
    fm_mog2_sequences_clear(&seq);
    return result;
}

PyMethodDef fm_mog2_cpu_methods_module[] = {
    {"_cpu_apply_cameras", (PyCFunction)(void (*)(void))cpu_apply_cameras,
     METH_VARARGS | METH_KEYWORDS, FM_DOC_CPU_APPLY_CAMERAS},
    {NULL, NULL, 0, NULL},
};

static PyObject *MOG2Cpu_get_background_image(PyObject *op, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"out", NULL};
    fm_MOG2Cpu *self = (fm_MOG2Cpu *)op;
    PyObject *out_arg = Py_None, *out = NULL;
    fm_host_image img;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:get_background_image", kwlist, &out_arg))
        return NULL;
    if (fm_mog2_lock_open(&self->base) < 0)
        return NULL;
    const fm_mog2_geometry g = self->base.geometry;
    if (self->model == NULL) {
        PyErr_SetString(PyExc_ValueError, "there is no model yet: call apply() first");
        goto done;
    }
    if (out_arg != Py_None) {
        fm_image_rule rule = fm_mog2_background_rule(&g);
        if (fm_host_image_check(out_arg, "out", &rule, &img) < 0)
            goto done;
        out = Py_NewRef(out_arg);
    }
    else {
        fm_image_shape shape = fm_mog2_background_shape(&g);
        npy_intp dims[3] = {shape.height, shape.width, shape.channels};
        if ((out = PyArray_SimpleNew(shape.ndim, dims, shape.type_num)) == NULL
            || fm_host_image_check(out, "out", NULL, &img) < 0) {
            Py_CLEAR(out);
            goto done;
        }
    }
    fm_mog2_params params = fm_mog2_settings_params(&self->base.settings);
    /* The model as it stands: a changed n_mixtures takes effect at the next
     * apply(), which restarts the model (the GPU subtractor does the same). */
    params.n_mixtures = g.n_mixtures;
    fm_mog2_host_model model = host_model(self, &g);
    if (fm_mog2_cpu_background(&params, &model, g.is_float, img.data, img.pitch) != FM_MOG2_OK) {
        PyErr_SetString(PyExc_RuntimeError, "the host model cannot give a background image");
        Py_CLEAR(out);
    }
done:
    fm_mog2_unlock(&self->base);
    return out;
}

static PyObject *MOG2Cpu_mode_counts(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    fm_MOG2Cpu *self = (fm_MOG2Cpu *)op;
    if (fm_mog2_lock_open(&self->base) < 0)
        return NULL;
    PyObject *counts = NULL;
    if (self->model == NULL) {
        PyErr_SetString(PyExc_ValueError, "there is no model yet: call apply() first");
    }
    else {
        fm_mog2_host_model model = host_model(self, &self->base.geometry);
        npy_intp dims[2] = {model.height, model.width};
        if ((counts = PyArray_SimpleNew(2, dims, NPY_UINT8)) != NULL)
            memcpy(PyArray_DATA((PyArrayObject *)counts), model.mode_count,
                   (size_t)model.width * (size_t)model.height);
    }
    fm_mog2_unlock(&self->base);
    return counts;
}

/* The host model and the snapshot's planes (mog2_snapshot.c): quantity
 * values j = 0 .. count-1 at `offset` of every pixel's block are plane j,
 * value j of pixel i at [j * pixels + i]. */
static void blocks_to_planes(const fm_mog2_host_model *m, size_t offset, size_t count,
                             float *planes)
{
    size_t pixels = (size_t)m->width * (size_t)m->height;
    for (size_t i = 0; i < pixels; ++i)
        for (size_t j = 0; j < count; ++j)
            planes[j * pixels + i] = m->blocks[i * m->block + offset + j];
}

static void planes_to_blocks(const fm_mog2_host_model *m, size_t offset, size_t count,
                             const float *planes)
{
    size_t pixels = (size_t)m->width * (size_t)m->height;
    for (size_t i = 0; i < pixels; ++i)
        for (size_t j = 0; j < count; ++j)
            m->blocks[i * m->block + offset + j] = planes[j * pixels + i];
}

/* Offset and count, in a pixel's block, of snapshot array k. */
static void block_span(const fm_mog2_geometry *g, int k, size_t *offset, size_t *count)
{
    const size_t modes = (size_t)g->n_mixtures;
    *offset = k * modes;            /* weight, variance, then the means */
    *count = k == FM_MOG2_SNAP_MEAN ? modes * (size_t)g->channels : modes;
}

/* The model as the snapshot's arrays (new references); the lock is held. */
static int model_arrays(fm_MOG2Cpu *self, PyObject *arrays[FM_MOG2_SNAPSHOT_ARRAYS])
{
    if (self->model == NULL) {
        PyErr_SetString(PyExc_ValueError, "there is no model yet: call apply() first");
        return -1;
    }
    const fm_mog2_geometry g = self->base.geometry;
    fm_mog2_host_model model = host_model(self, &g);
    if (fm_mog2_snapshot_arrays(&g, arrays) < 0)
        return -1;
    for (int k = FM_MOG2_SNAP_WEIGHT; k <= FM_MOG2_SNAP_MEAN; ++k) {
        size_t offset, count;
        block_span(&g, k, &offset, &count);
        blocks_to_planes(&model, offset, count, PyArray_DATA((PyArrayObject *)arrays[k]));
    }
    memcpy(PyArray_DATA((PyArrayObject *)arrays[FM_MOG2_SNAP_MODE_COUNT]), model.mode_count,
           (size_t)g.width * (size_t)g.height);
    return 0;
}

/* _state(): the snapshot's arrays alone, for the benchmark's floor (modes
 * visited per pixel) and for tests. */
static PyObject *MOG2Cpu_state(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    fm_MOG2Cpu *self = (fm_MOG2Cpu *)op;
    PyObject *arrays[FM_MOG2_SNAPSHOT_ARRAYS], *state = NULL;
    if (fm_mog2_lock_open(&self->base) < 0)
        return NULL;
    if (model_arrays(self, arrays) == 0) {
        state = Py_BuildValue("{s:N,s:N,s:N,s:N}", "weight", arrays[0], "variance", arrays[1],
                              "mean", arrays[2], "mode_count", arrays[3]);
    }
    fm_mog2_unlock(&self->base);
    return state;
}

static PyObject *MOG2Cpu_snapshot(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    fm_MOG2Cpu *self = (fm_MOG2Cpu *)op;
    PyObject *arrays[FM_MOG2_SNAPSHOT_ARRAYS], *snapshot = NULL;
    if (fm_mog2_lock_open(&self->base) < 0)
        return NULL;
    if (model_arrays(self, arrays) == 0) {
        snapshot = fm_mog2_snapshot_dict(&self->base, arrays);
        fm_mog2_snapshot_arrays_clear(arrays);
    }
    fm_mog2_unlock(&self->base);
    return snapshot;
}

/* restore(snapshot): a new subtractor of this class whose model is the
 * snapshot's; the snapshot is checked whole before anything is made. */
static PyObject *MOG2Cpu_restore(PyObject *cls, PyObject *snapshot)
{
    fm_mog2_snapshot s;
    if (fm_mog2_snapshot_read(snapshot, &s) < 0)
        return NULL;
    fm_MOG2Cpu *self = (fm_MOG2Cpu *)fm_mog2_snapshot_subtractor((PyTypeObject *)cls, &s, NULL);
    /* no other thread has it yet: no lock needed */
    if (self != NULL && rebuild_model(self, &s.geometry) < 0)
        Py_CLEAR(self);
    if (self != NULL) {
        fm_mog2_host_model model = host_model(self, &s.geometry);
        for (int k = FM_MOG2_SNAP_WEIGHT; k <= FM_MOG2_SNAP_MEAN; ++k) {
            size_t offset, count;
            block_span(&s.geometry, k, &offset, &count);
            planes_to_blocks(&model, offset, count, PyArray_DATA(s.arrays[k]));
        }
        memcpy(model.mode_count, PyArray_DATA(s.arrays[FM_MOG2_SNAP_MODE_COUNT]),
               (size_t)s.geometry.width * (size_t)s.geometry.height);
        self->base.frames_seen = s.frames_seen;
    }
    fm_mog2_snapshot_clear(&s);
    return (PyObject *)self;
}

static int MOG2Cpu_traverse(PyObject *op, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(op));
    return 0;
}

static PyMethodDef MOG2Cpu_methods[] = {
    {"apply", (PyCFunction)(void (*)(void))MOG2Cpu_apply, METH_FASTCALL | METH_KEYWORDS,
     FM_DOC_MOG2CPU_APPLY},
    {"apply_batch", (PyCFunction)(void (*)(void))MOG2Cpu_apply_batch,
     METH_FASTCALL | METH_KEYWORDS, FM_DOC_MOG2CPU_APPLY_BATCH},
    {"get_background_image", (PyCFunction)(void (*)(void))MOG2Cpu_get_background_image,
     METH_VARARGS | METH_KEYWORDS, FM_DOC_MOG2CPU_GET_BACKGROUND_IMAGE},
    {"getBackgroundImage", (PyCFunction)(void (*)(void))MOG2Cpu_get_background_image,
     METH_VARARGS | METH_KEYWORDS, "OpenCV-style alias of get_background_image."},
    {"mode_counts", MOG2Cpu_mode_counts, METH_NOARGS, FM_DOC_MOG2CPU_MODE_COUNTS},
    {"_state", MOG2Cpu_state, METH_NOARGS, FM_DOC_MOG2CPU_STATE},
    {"snapshot", MOG2Cpu_snapshot, METH_NOARGS, FM_DOC_MOG2CPU_SNAPSHOT},
    {"restore", MOG2Cpu_restore, METH_O | METH_CLASS, FM_DOC_MOG2CPU_RESTORE},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot MOG2Cpu_slots[] = {
    {Py_tp_new, MOG2Cpu_new},
    {Py_tp_dealloc, fm_mog2_dealloc},
    {Py_tp_traverse, MOG2Cpu_traverse},
    {Py_tp_methods, MOG2Cpu_methods},
    {Py_tp_doc, (void *)FM_DOC_MOG2CPU},
    {0, NULL},
};

PyType_Spec fm_mog2_cpu_spec = {
    .name = "fastmog.cpu.BackgroundSubtractorMOG2",
    .basicsize = sizeof(fm_MOG2Cpu),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = MOG2Cpu_slots,
};
