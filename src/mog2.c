/* fastmog.BackgroundSubtractorMOG2: OpenCV's CPU MOG2, bit for bit, on the
 * GPU. The model lives in one device allocation made at (re)initialisation;
 * the per-frame path allocates nothing. */
#include "mog2_base.h"
#include "docstrings.h"

typedef struct fm_MOG2 {
    fm_MOG2Base base;
    int device;
    fm_DeviceBuffer *model;         /* the modes' tiles | mode_count (mog2_params.h) */
    fm_GpuMat *mask;                /* apply()'s reused output, H x W uint8 */
    fm_GpuMat *batch_masks;         /* apply_batch()'s reused outputs, K*H x W uint8 */
    fm_GpuMat **staging;            /* device copies of numpy inputs, [2k] frame k and
                                       [2k+1] its known foreground; owned, PyMem */
    int staging_slots;
} fm_MOG2;

static fm_mog2_model model_view(const fm_MOG2 *self)
{
    return fm_mog2_model_at(self->model->ptr, &self->base.geometry);
}

static void release_model(fm_MOG2Base *base)
{
    fm_MOG2 *self = (fm_MOG2 *)base;
    Py_CLEAR(self->model);
    Py_CLEAR(self->mask);
    Py_CLEAR(self->batch_masks);
    for (int k = 0; k < self->staging_slots; ++k)
        Py_CLEAR(self->staging[k]);
    PyMem_Free(self->staging);
    self->staging = NULL;
    self->staging_slots = 0;
}

static PyObject *MOG2_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    fm_state *st = fm_state_of_type(type);
    PyObject *device_arg = NULL;
    fm_MOG2 *self = (fm_MOG2 *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    if (fm_mog2_base_init(&self->base, args, kwargs, "BackgroundSubtractorMOG2", &device_arg,
                          release_model) < 0
        || fm_resolve_device(st, device_arg, &self->device) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

/* Makes room for the staging of `frames` frames; the lock is held. */
static int reserve_staging(fm_MOG2 *self, int frames)
{
    if (2 * frames <= self->staging_slots)
        return 0;
    fm_GpuMat **grown = PyMem_Realloc(self->staging, 2 * (size_t)frames * sizeof *grown);
    if (grown == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (int k = self->staging_slots; k < 2 * frames; ++k)
        grown[k] = NULL;
    self->staging = grown;
    self->staging_slots = 2 * frames;
    return 0;
}

/* Replaces the model and the mask buffer for a new frame geometry, zeroed so
 * no byte of the model is ever uninitialised. Nothing changes if an
 * allocation fails. */
static int rebuild_model(fm_state *st, fm_MOG2 *self, const fm_mog2_geometry *g,
                         fm_Stream *stream)
{
    char what[96];
    snprintf(what, sizeof what, "a %dx%dx%d MOG2 model with %d modes", g->height, g->width,
             g->channels, g->n_mixtures);
    fm_DeviceBuffer *model = fm_device_buffer_alloc(st, self->device, fm_mog2_model_bytes(g),
                                                    what);
    if (model == NULL)
        return -1;
    fm_GpuMat *mask = self->mask;
    fm_image_shape mask_shape = {g->height, g->width, 1, 2, NPY_UINT8, 0};
    if (mask == NULL || mask->shape.height != g->height || mask->shape.width != g->width)
        mask = fm_gpumat_new(st, self->device, &mask_shape);
    else
        Py_INCREF(mask);
    if (mask == NULL) {
        Py_DECREF(model);
        return -1;
    }
    cudaError_t err = cudaMemsetAsync(model->ptr, 0, model->size, stream->handle);
    if (err != cudaSuccess || fm_device_buffer_use(st, model, stream, FM_USE_RELEASE_AFTER) < 0) {
        if (err != cudaSuccess)
            fm_cuda_error(st, err, "clearing %s", what);
        Py_DECREF(model);
        Py_DECREF(mask);
        return -1;
    }
    Py_XSETREF(self->model, model);
    Py_XSETREF(self->mask, mask);
    /* a fresh model that has seen nothing, consistent even if the call
     * fails later; the call's commit then counts its frames */
    self->base.geometry = *g;
    self->base.frames_seen = 0;
    return 0;
}

/* Whether a use of `buf` on `stream` with FM_USE_AFTER_EARLIER makes the
 * stream wait for other streams (the rule of fm_device_buffer_use). */
static int would_wait(const fm_DeviceBuffer *buf, const fm_Stream *stream)
{
    return buf->n_earlier > 0
           || (buf->last_stream != NULL && !buf->last_stream->closed && buf->last_stream != stream);
}

/* A frame argument that is neither a numpy array nor a GpuMat: another
 * library's device memory, whose producer the stream may wait for. */
static int is_foreign(fm_state *st, PyObject *obj)
{
    return obj != NULL && obj != Py_None && !PyArray_Check(obj)
           && !Py_IS_TYPE(obj, st->GpuMat_type);
}

/* The device images of one frame of a call. References are owned. */
typedef struct frame_images {
    fm_GpuMat *frame;
    fm_GpuMat *known;               /* NULL: no known foreground */
    fm_GpuMat *mask;                /* where its mask goes */
    int reused_mask;                /* the mask is the subtractor's own */
} frame_images;

static void release_images(frame_images *images, int count)
{
    for (int k = 0; k < count; ++k) {
        Py_CLEAR(images[k].frame);
        Py_CLEAR(images[k].known);
        Py_CLEAR(images[k].mask);
    }
}

/* The names of frame argument `index` of a call and of its known-foreground
 * mask, for messages (`index` < 0: the call's only frame). */
static void frame_names(int index, char *name, size_t name_size, char *known_name,
                        size_t known_size)
{
    snprintf(name, name_size, index < 0 ? "frame" : "frames[%d]", index);
    snprintf(known_name, known_size, index < 0 ? "known_foreground" : "known_foreground[%d]",
             index);
}

/* Resolves the device memory of a frame argument (and of its known mask)
 * that is not a numpy array: a GpuMat or a producer's memory. Runs BEFORE
 * the subtractor's lock is taken, because a producer's __dlpack__ or
 * __cuda_array_interface__ may call back into the same subtractor. Checked
 * against the rules later, by stage_frame, under the lock. */
static int resolve_foreign(fm_state *st, PyObject *frame_arg, PyObject *known_arg, int index,
                           fm_Stream *stream, PyObject *timer, frame_images *out)
{
    char name[48], known_name[64];
    frame_names(index, name, sizeof name, known_name, sizeof known_name);
    if (!PyArray_Check(frame_arg)
        && (out->frame = fm_as_device_image(st, frame_arg, name, NULL, stream, NULL,
                                            timer)) == NULL)
        return -1;
    if (known_arg != Py_None && !PyArray_Check(known_arg)
        && (out->known = fm_as_device_image(st, known_arg, known_name, NULL, stream, NULL,
                                            timer)) == NULL)
        return -1;
    return 0;
}

/* Brings the frame argument `index` of a call (and its known-foreground mask;
 * None: none) onto the device through staging slot `slot`, checked: against
 * the frame rule, or against `first`, the batch's first frame. `index` < 0:
 * the call's only frame. Device memory was resolved by resolve_foreign and
 * is only checked here. The lock is held. */
static int stage_frame(fm_state *st, fm_MOG2 *self, PyObject *frame_arg, PyObject *known_arg,
                       int index, int slot, const fm_image_shape *first, fm_Stream *stream,
                       PyObject *timer, frame_images *out)
{
    char name[48], known_name[64];
    frame_names(index, name, sizeof name, known_name, sizeof known_name);
    fm_image_rule rule = first != NULL ? fm_mog2_batch_frame_rule(first) : fm_mog2_frame_rule();
    if (out->frame != NULL) {
        if (fm_image_rule_check(&rule, &out->frame->shape, name) < 0)
            return -1;
    }
    else if ((out->frame = fm_as_device_image(st, frame_arg, name, &rule, stream,
                                              &self->staging[2 * slot], timer)) == NULL) {
        return -1;
    }
    if (known_arg == Py_None)
        return 0;
    fm_image_rule mask_rule = fm_mog2_mask_rule(&out->frame->shape, 0);
    if (out->known != NULL)
        return fm_image_rule_check(&mask_rule, &out->known->shape, known_name);
    out->known = fm_as_device_image(st, known_arg, known_name, &mask_rule, stream,
                                    &self->staging[2 * slot + 1], timer);
    return out->known == NULL ? -1 : 0;
}

/* Checks a caller's mask (a GpuMat) against the frame: the argument
 * fgmasks[index], or fgmask when index < 0. A new reference. */
static fm_GpuMat *caller_mask(fm_state *st, fm_MOG2 *self, PyObject *arg, int index,
                              const fm_image_shape *frame)
{
    char name[32];
    snprintf(name, sizeof name, index < 0 ? "fgmask" : "fgmasks[%d]", index);
    fm_image_rule rule = fm_mog2_mask_rule(frame, 1);
    fm_GpuMat *mask = fm_gpumat_check_open(st, arg, name);
    if (mask == NULL || fm_image_rule_check(&rule, &mask->shape, name) < 0
        || fm_check_same_device(mask, self->device, name) < 0)
        return NULL;
    return (fm_GpuMat *)Py_NewRef(mask);
}

/* The frames' uses of device memory, in stream order (see devmem.c).
 * Calls on different streams share the model and the reused masks: this one
 * runs after the earlier ones on the GPU, so they never interleave. */
static int use_images(fm_state *st, const frame_images *images, int count, fm_Stream *stream)
{
    for (int k = 0; k < count; ++k) {
        const frame_images *im = &images[k];
        if (fm_device_buffer_use(st, im->mask->buffer, stream,
                                 im->reused_mask ? FM_USE_AFTER_EARLIER : FM_USE_RELEASE_AFTER)
                    < 0
            || fm_device_buffer_use(st, im->frame->buffer, stream, FM_USE_RELEASE_AFTER) < 0
            || (im->known != NULL
                && fm_device_buffer_use(st, im->known->buffer, stream, FM_USE_RELEASE_AFTER) < 0))
            return -1;
    }
    return 0;
}

static fm_mog2_frame_io frame_io(const frame_images *im, const fm_mog2_step *step)
{
    fm_mog2_frame_io io;
    io.frame = im->frame->data;
    io.frame_pitch = im->frame->pitch;
    io.known = im->known != NULL ? (const unsigned char *)im->known->data : NULL;
    io.known_pitch = im->known != NULL ? im->known->pitch : 0;
    io.mask = (unsigned char *)im->mask->data;
    io.mask_pitch = im->mask->pitch;
    io.rates = step->rates;
    io.restart = step->restart;
    return io;
}

/* Plans `count` consecutive frames of one geometry (staged in `images`)
 * into `steps`, rebuilds the model when the first needs it, queues them and
 * commits them. A frame still without a mask (apply without fgmask=) gets
 * the subtractor's own, taken after the rebuild because that may replace
 * it. The lock is held. */
static int queue_frames(fm_state *st, fm_MOG2 *self, double learning_rate, fm_mog2_step *steps,
                        frame_images *images, int count, fm_Stream *stream, fm_call *call)
{
    fm_mog2_plan_frames(&self->base, &images[0].frame->shape, learning_rate, count, steps);
    if (steps[0].rebuild && rebuild_model(st, self, &steps[0].geometry, stream) < 0)
        return -1;
    if (images[0].mask == NULL) {
        images[0].mask = (fm_GpuMat *)Py_NewRef(self->mask);
        images[0].reused_mask = 1;
    }
    const fm_mog2_geometry *g = &steps[0].geometry;
    /* The queued point, only when the call is about to wait for other
     * streams (a timing event less per call in the steady state). */
    int waits = would_wait(self->model, stream);
    for (int k = 0; k < count && !waits; ++k)
        waits = images[k].reused_mask && would_wait(images[k].mask->buffer, stream);
    if (waits && fm_call_gpu_queue(st, call) < 0)
        return -1;
    if (fm_device_buffer_use(st, self->model, stream, FM_USE_AFTER_EARLIER) < 0
        || use_images(st, images, count, stream) < 0)
        return -1;
    fm_mog2_model model = fm_mog2_model_at(self->model->ptr, g);
    for (int start = 0; start < count; start += FM_MOG2_MAX_PASS) {
        fm_mog2_frame_io io[FM_MOG2_MAX_PASS];
        int n = count - start < FM_MOG2_MAX_PASS ? count - start : FM_MOG2_MAX_PASS;
        for (int k = 0; k < n; ++k)
            io[k] = frame_io(&images[start + k], &steps[start + k]);
        /* the start event right before the first launch: host work between
         * the two would count as GPU time on an idle stream */
        if (start == 0 && fm_call_gpu_begin(st, call) < 0)
            return -1;
        cudaError_t err = fm_launch_mog2_apply(steps[0].params, model, g->is_float, io, n,
                                               stream->handle);
        fm_call_gpu_submitted(call);
        if (err != cudaSuccess) {
            fm_cuda_error(st, err, "launching MOG2 on %d %dx%dx%d frame(s)", n, g->height,
                          g->width, g->channels);
            return -1;
        }
    }
    if (fm_call_gpu_end(st, call) < 0)
        return -1;
    int known = 0;
    for (int k = 0; k < count; ++k)
        known += images[k].known != NULL;
    int64_t read, written;
    fm_mog2_bytes(g, count, known, FM_MOG2_MAX_PASS, &read, &written);
    fm_call_bytes(call, read, written);
    fm_mog2_commit(&self->base, &steps[count - 1]);
    return 0;
}

/* apply_batch's K masks when the caller gives none: views of one K*H x W
 * buffer the subtractor keeps (grown when a batch is larger). */
static int reused_batch_masks(fm_state *st, fm_MOG2 *self, const fm_image_shape *frame,
                              frame_images *images, int count)
{
    fm_GpuMat *all = self->batch_masks;
    if (all == NULL || all->shape.width != frame->width
        || all->shape.height < count * frame->height
        || all->shape.height % frame->height != 0) {
        fm_image_shape shape = {count * frame->height, frame->width, 1, 2, NPY_UINT8, 0};
        if ((all = fm_gpumat_new(st, self->device, &shape)) == NULL)
            return -1;
        Py_XSETREF(self->batch_masks, all);
    }
    fm_image_shape one = {frame->height, frame->width, 1, 2, NPY_UINT8, 0};
    for (int k = 0; k < count; ++k) {
        images[k].mask = fm_gpumat_view(st, all->buffer,
                                        all->data + (size_t)k * frame->height * all->pitch,
                                        all->pitch, &one);
        if (images[k].mask == NULL)
            return -1;
        images[k].reused_mask = 1;
    }
    return 0;
}

/* apply() and apply_batch(): one path, apply's frame being a batch of one
 * whose arguments are named frame and fgmask and whose result is the mask
 * itself. */
static PyObject *apply_frames(PyObject *op, PyObject *const *args, Py_ssize_t nargs,
                                 PyObject *kwnames, int batch)
{
    fm_state *st = fm_state_of(op);
    fm_MOG2 *self = (fm_MOG2 *)op;
    const int flags = FM_MOG2_CALL_GPU | (batch ? FM_MOG2_CALL_BATCH : 0);
    PyObject *result = NULL;
    fm_mog2_call_args a;
    fm_mog2_sequences seq;
    frame_images one_image = {NULL, NULL, NULL, 0}, *images = &one_image;
    fm_mog2_step one_step, *steps = &one_step;   /* apply allocates nothing */
    fm_device_guard guard;
    fm_call call;

    if (fm_mog2_call_args_parse(st, args, nargs, kwnames, flags, self->device, &a) < 0
        || fm_mog2_call_frames(&a, flags, &seq) < 0)
        return NULL;
    fm_Stream *stream = a.stream;
    const int count = seq.count;
    /* Held through the call (stream.c's rule): the lock wait, staging and
     * producers release the GIL. Parsing may have run Python code (a
     * learning rate's __float__): the hold refuses a stream closed since. */
    if (fm_stream_hold(stream) < 0) {
        stream = NULL;
        goto out;
    }
    if (count == 0) {
        result = PyTuple_New(0);
        goto out;
    }
    if (count > 1) {
        images = PyMem_Calloc((size_t)count, sizeof *images);
        steps = PyMem_Calloc((size_t)count, sizeof *steps);
    }
    if (images == NULL || steps == NULL) {
        PyErr_NoMemory();
        goto out;
    }
    int h, w, c;
    fm_peek_shape(st, fm_mog2_item(&seq, seq.frames, 0), &h, &w, &c);
    if (fm_call_begin(st, &call, batch ? "BackgroundSubtractorMOG2.apply_batch"
                                       : "BackgroundSubtractorMOG2.apply",
                      "kernel mog2_apply", a.timer, stream, h > 0 ? h * count : -1, w, c) < 0)
        goto out;
    if (fm_device_enter(st, self->device, &guard) < 0)
        goto end_call;
    for (int k = 0; k < count; ++k)
        if (resolve_foreign(st, fm_mog2_item(&seq, seq.frames, k), fm_mog2_item(&seq, seq.known, k),
                            fm_mog2_index(&seq, k), stream, a.timer, &images[k]) < 0)
            goto exit_device;
    if (fm_mog2_lock_open(&self->base) < 0)
        goto exit_device;
    if (reserve_staging(self, count) < 0)
        goto done;
    for (int k = 0; k < count; ++k) {
        /* a producer's memory makes the stream wait for the producer */
        if ((is_foreign(st, fm_mog2_item(&seq, seq.frames, k))
             || is_foreign(st, fm_mog2_item(&seq, seq.known, k)))
            && fm_call_gpu_queue(st, &call) < 0)
            goto done;
        if (stage_frame(st, self, fm_mog2_item(&seq, seq.frames, k),
                        fm_mog2_item(&seq, seq.known, k), fm_mog2_index(&seq, k), k,
                        k == 0 ? NULL : &images[0].frame->shape, stream, a.timer, &images[k]) < 0)
            goto done;
    }
    /* The caller's masks are checked after staging: another thread may have
     * closed one while this one waited for the lock (the GIL was released).
     * apply without fgmask= gets the model's own mask in queue_frames. */
    const fm_image_shape *shape = &images[0].frame->shape;
    if (seq.fgmasks != NULL) {
        for (int k = 0; k < count; ++k)
            if ((images[k].mask = caller_mask(st, self, fm_mog2_item(&seq, seq.fgmasks, k),
                                              fm_mog2_index(&seq, k), shape)) == NULL)
                goto done;
    }
    else if (batch && reused_batch_masks(st, self, shape, images, count) < 0) {
        goto done;
    }
    if (queue_frames(st, self, a.learning_rate, steps, images, count, stream, &call) < 0)
        goto done;
    if (!batch)
        result = Py_NewRef(images[0].mask);
    else if ((result = PyTuple_New(count)) != NULL)
        for (int k = 0; k < count; ++k)
            PyTuple_SET_ITEM(result, k, Py_NewRef(images[k].mask));
done:
    fm_mog2_unlock(&self->base);
exit_device:
    fm_device_exit(&guard);
    release_images(images, count);
end_call:
    result = fm_call_end(st, &call, result);
out:
    if (images != &one_image)
        PyMem_Free(images);
    if (steps != &one_step)
        PyMem_Free(steps);
    if (stream != NULL)
        fm_stream_unhold(stream);
    fm_mog2_sequences_clear(&seq);
    return result;
}

static PyObject *MOG2_apply(PyObject *op, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames)
{
    return apply_frames(op, args, nargs, kwnames, 0);
}

static PyObject *MOG2_apply_batch(PyObject *op, PyObject *const *args, Py_ssize_t nargs,
                                   PyObject *kwnames)
{
    return apply_frames(op, args, nargs, kwnames, 1);
}

/* ---- apply_cameras: many models, one launch ------------------------------ */

/* One camera of apply_cameras: its subtractor (borrowed; the call's tuple
 * holds it) and what its apply() would do. */
typedef struct camera_call {
    fm_MOG2 *sub;
    double learning_rate;
    frame_images images;
    fm_mog2_step step;
} camera_call;

/* Stages, checks and plans every camera, then (nothing can be refused any
 * more) rebuilds the models that need it and queues the one launch. Every
 * lock is held. */
static PyObject *cameras_locked(fm_state *st, camera_call *cams, const fm_mog2_sequences *seq,
                                fm_Stream *stream, PyObject *timer, fm_call *call)
{
    const int count = seq->count;
    for (int k = 0; k < count; ++k) {
        camera_call *cam = &cams[k];
        if (reserve_staging(cam->sub, 1) < 0
            || stage_frame(st, cam->sub, fm_mog2_item(seq, seq->frames, k),
                           fm_mog2_item(seq, seq->known, k), k, 0, NULL, stream, timer,
                           &cam->images) < 0)
            return NULL;
        if (seq->fgmasks != NULL
            && (cam->images.mask = caller_mask(st, cam->sub,
                                               fm_mog2_item(seq, seq->fgmasks, k), k,
                                               &cam->images.frame->shape)) == NULL)
            return NULL;
        fm_mog2_plan(&cam->sub->base, &cam->images.frame->shape, cam->learning_rate,
                     &cam->step);
    }
    fm_mog2_camera *table = PyMem_Calloc((size_t)count, sizeof *table);
    if (table == NULL)
        return PyErr_NoMemory();
    PyObject *result = NULL;
    for (int k = 0; k < count; ++k) {
        camera_call *cam = &cams[k];
        if (cam->step.rebuild && rebuild_model(st, cam->sub, &cam->step.geometry, stream) < 0)
            goto done;
        if (cam->images.mask == NULL) {
            cam->images.mask = (fm_GpuMat *)Py_NewRef(cam->sub->mask);
            cam->images.reused_mask = 1;
        }
        if (fm_device_buffer_use(st, cam->sub->model, stream, FM_USE_AFTER_EARLIER) < 0
            || use_images(st, &cam->images, 1, stream) < 0)
            goto done;
        table[k].params = cam->step.params;
        table[k].model = fm_mog2_model_at(cam->sub->model->ptr, &cam->step.geometry);
        table[k].io = frame_io(&cam->images, &cam->step);
        table[k].is_float = cam->step.geometry.is_float;
        int64_t read, written;
        fm_mog2_bytes(&cam->step.geometry, 1, cam->images.known != NULL, 1, &read, &written);
        fm_call_bytes(call, read, written);
    }
    if (fm_call_gpu_begin(st, call) < 0)
        goto done;
    cudaError_t err = fm_launch_mog2_cameras(table, count, stream->handle);
    if (err != cudaSuccess) {
        fm_cuda_error(st, err, "launching MOG2 on %d cameras", count);
        goto done;
    }
    if (fm_call_gpu_end(st, call) < 0 || (result = PyTuple_New(count)) == NULL)
        goto done;
    for (int k = 0; k < count; ++k) {
        fm_mog2_commit(&cams[k].sub->base, &cams[k].step);
        PyTuple_SET_ITEM(result, k, Py_NewRef(cams[k].images.mask));
    }
done:
    PyMem_Free(table);
    return result;
}

static PyObject *apply_cameras(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"", "", "learning_rate", "stream", "fgmasks", "known_foreground",
                             "timer", NULL};
    fm_state *st = fm_state_of_module(module);
    PyObject *subs_arg, *frames_arg, *rate_arg = NULL, *stream_arg = NULL;
    PyObject *fgmasks_arg = Py_None, *known_arg = Py_None, *timer = NULL, *result = NULL;
    PyObject *subs = NULL;
    fm_Stream *held = NULL;         /* the stream, held through the call */
    fm_mog2_sequences seq = {NULL, NULL, NULL, 0, 0};
    camera_call *cams = NULL;
    fm_MOG2Base **bases = NULL;     /* [0, n): call order; [n, 2n): lock order */
    double *rates = NULL;
    fm_device_guard guard;
    fm_call call;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|O$OOOO:apply_cameras", kwlist, &subs_arg,
                                     &frames_arg, &rate_arg, &stream_arg, &fgmasks_arg,
                                     &known_arg, &timer)
        || (subs = fm_mog2_items(subs_arg, "subtractors", -1)) == NULL)
        return NULL;
    const int count = (int)PySequence_Fast_GET_SIZE(subs);
    if (fm_mog2_sequences_get(&seq, frames_arg, known_arg, fgmasks_arg, count) < 0)
        goto out;
    cams = PyMem_Calloc((size_t)count + 1, sizeof *cams);
    bases = PyMem_Calloc(2 * (size_t)count + 1, sizeof *bases);
    rates = PyMem_Calloc((size_t)count + 1, sizeof *rates);
    if (cams == NULL || bases == NULL || rates == NULL) {
        PyErr_NoMemory();
        goto out;
    }
    if (fm_mog2_camera_args(subs, st->MOG2_type, rate_arg, bases, rates, bases + count) < 0)
        goto out;
    for (int k = 0; k < count; ++k) {
        cams[k].sub = (fm_MOG2 *)bases[k];
        cams[k].learning_rate = rates[k];
        if (cams[k].sub->device != cams[0].sub->device) {
            PyErr_Format(PyExc_ValueError,
                         "subtractors[%d] is on device %d and subtractors[0] on device %d: "
                         "one call serves one device", k, cams[k].sub->device,
                         cams[0].sub->device);
            goto out;
        }
    }
    fm_Stream *stream = fm_require_stream(st, stream_arg, count > 0 ? cams[0].sub->device : -1);
    /* Held through the call (stream.c's rule). */
    if (stream == NULL || fm_stream_hold(stream) < 0)
        goto out;
    held = stream;
    if (count == 0) {
        result = PyTuple_New(0);
        goto out;
    }
    int h, w, c;
    fm_peek_shape(st, fm_mog2_item(&seq, seq.frames, 0), &h, &w, &c);
    if (fm_call_begin(st, &call, "apply_cameras", "kernel mog2_cameras", timer, stream,
                      h > 0 ? h : -1, w, c) < 0)
        goto out;
    if (fm_device_enter(st, cams[0].sub->device, &guard) == 0) {
        int resolved = 0;
        while (resolved < count
               && resolve_foreign(st, fm_mog2_item(&seq, seq.frames, resolved),
                                  fm_mog2_item(&seq, seq.known, resolved), resolved, stream,
                                  timer, &cams[resolved].images) == 0)
            resolved++;
        if (resolved == count && fm_call_gpu_queue(st, &call) == 0
            && fm_mog2_lock_all(bases + count, count) == 0) {
            result = cameras_locked(st, cams, &seq, stream, timer, &call);
            fm_mog2_unlock_all(bases + count, count);
        }
        fm_device_exit(&guard);
    }
    for (int k = 0; k < count; ++k)
        release_images(&cams[k].images, 1);
    result = fm_call_end(st, &call, result);
out:
    if (held != NULL)
        fm_stream_unhold(held);
    PyMem_Free(cams);
    PyMem_Free(bases);
    PyMem_Free(rates);
    Py_DECREF(subs);
    fm_mog2_sequences_clear(&seq);
    return result;
}

PyMethodDef fm_mog2_methods_module[] = {
    {"apply_cameras", (PyCFunction)(void (*)(void))apply_cameras, METH_VARARGS | METH_KEYWORDS,
     FM_DOC_APPLY_CAMERAS},
    {NULL, NULL, 0, NULL},
};

static PyObject *background_held(fm_state *st, fm_MOG2 *self, fm_Stream *stream,
                                 PyObject *out_arg, PyObject *timer);

static PyObject *MOG2_get_background_image(PyObject *op, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"stream", "out", "timer", NULL};
    fm_state *st = fm_state_of(op);
    fm_MOG2 *self = (fm_MOG2 *)op;
    PyObject *stream_arg = NULL, *out_arg = Py_None, *timer = NULL;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$OOO:get_background_image", kwlist,
                                     &stream_arg, &out_arg, &timer))
        return NULL;
    fm_Stream *stream = fm_require_stream(st, stream_arg, self->device);
    /* Held through the call (stream.c's rule): the lock wait releases the GIL. */
    if (stream == NULL || fm_stream_hold(stream) < 0)
        return NULL;
    PyObject *result = background_held(st, self, stream, out_arg, timer);
    fm_stream_unhold(stream);
    return result;
}

static PyObject *background_held(fm_state *st, fm_MOG2 *self, fm_Stream *stream,
                                 PyObject *out_arg, PyObject *timer)
{
    fm_GpuMat *out = NULL;
    fm_device_guard guard;
    fm_call call;
    const fm_mog2_geometry shown = self->base.geometry;
    if (fm_call_begin(st, &call, "BackgroundSubtractorMOG2.get_background_image",
                      "kernel mog2_background", timer, stream, shown.height, shown.width,
                      shown.channels) < 0)
        return NULL;
    if (fm_device_enter(st, self->device, &guard) < 0)
        return fm_call_end(st, &call, NULL);
    if (fm_call_gpu_queue(st, &call) < 0 || fm_mog2_lock_open(&self->base) < 0)
        goto exit_device;
    const fm_mog2_geometry g = self->base.geometry;
    if (self->model == NULL) {
        PyErr_SetString(PyExc_ValueError, "there is no model yet: call apply() first");
        goto error;
    }
    fm_image_shape want = fm_mog2_background_shape(&g);
    fm_image_rule rule = fm_mog2_background_rule(&g);
    if ((out = fm_gpumat_out(st, out_arg, &rule, self->device, &want)) == NULL)
        goto error;
    if (fm_device_buffer_use(st, self->model, stream, FM_USE_AFTER_EARLIER) < 0
        || fm_device_buffer_use(st, out->buffer, stream, FM_USE_RELEASE_AFTER) < 0
        || fm_call_gpu_begin(st, &call) < 0)
        goto error;
    fm_mog2_params params = fm_mog2_settings_params(&self->base.settings);
    params.n_mixtures = g.n_mixtures;  /* the model as it stands, as on the host */
    cudaError_t err = fm_launch_mog2_background(params, model_view(self), fm_gpumat_image(out),
                                                stream->handle);
    if (err != cudaSuccess) {
        fm_cuda_error(st, err, "computing a MOG2 background image");
        goto error;
    }
    if (fm_call_gpu_end(st, &call) < 0)
        goto error;
    fm_call_bytes(&call, (int64_t)fm_mog2_model_bytes(&g),
                  (int64_t)fm_image_row_bytes(&out->shape) * out->shape.height);
    fm_mog2_unlock(&self->base);
    fm_device_exit(&guard);
    return fm_call_end(st, &call, (PyObject *)out);

error:
    fm_mog2_unlock(&self->base);
exit_device:
    fm_device_exit(&guard);
    Py_XDECREF(out);
    return fm_call_end(st, &call, NULL);
}

static PyObject *MOG2_mode_counts(PyObject *op, PyObject *Py_UNUSED(ignored))
{
    fm_MOG2 *self = (fm_MOG2 *)op;
    if (fm_mog2_lock_open(&self->base) < 0)
        return NULL;
    PyObject *view = NULL;
    if (self->model == NULL) {
        PyErr_SetString(PyExc_ValueError, "there is no model yet: call apply() first");
    }
    else {
        fm_mog2_model model = model_view(self);
        fm_image_shape shape = {model.height, model.width, 1, 2, NPY_UINT8, 1};
        view = (PyObject *)fm_gpumat_view(fm_state_of(op), self->model,
                                          (char *)model.mode_count, (size_t)model.width, &shape);
    }
    fm_mog2_unlock(&self->base);
    return view;
}

/* ---- snapshots (mog2_snapshot.c has the format) ---- */

static PyObject *snapshot_held(fm_state *st, fm_MOG2 *self, fm_Stream *stream)
{
    PyObject *arrays[FM_MOG2_SNAPSHOT_ARRAYS] = {NULL}, *snapshot = NULL;
    float *tiles = NULL;  /* the model's tiles on the host, untiled into the arrays */
    fm_device_guard guard;
    if (fm_device_enter(st, self->device, &guard) < 0)
        return NULL;
    if (fm_mog2_lock_open(&self->base) < 0)
        goto exit_device;
    if (self->model == NULL) {
        PyErr_SetString(PyExc_ValueError, "there is no model yet: call apply() first");
        goto unlock;
    }
    /* After the work queued on the model on every stream: waited for first,
     * interruptibly, so the copies into pageable memory (which return only
     * once done) then run at once, with the GIL released (the arrays are
     * ours alone; the subtractor's lock keeps the model). */
    const fm_mog2_geometry *g = &self->base.geometry;
    if (fm_mog2_snapshot_arrays(g, arrays) < 0)
        goto unlock;
    if ((tiles = PyMem_RawMalloc(fm_mog2_modes_bytes(g))) == NULL) {
        PyErr_NoMemory();
        goto unlock;
    }
    if (fm_device_buffer_use(st, self->model, stream, FM_USE_AFTER_EARLIER) < 0
        || fm_wait_stream(st, stream, "waiting for the work before a MOG2 snapshot") < 0)
        goto unlock;
    fm_mog2_model m = model_view(self);
    cudaError_t err;
    Py_BEGIN_ALLOW_THREADS
    err = cudaMemcpyAsync(tiles, m.modes, fm_mog2_modes_bytes(g), cudaMemcpyDeviceToHost,
                          stream->handle);
    if (err == cudaSuccess)
        err = cudaMemcpyAsync(PyArray_DATA((PyArrayObject *)arrays[FM_MOG2_SNAP_MODE_COUNT]),
                              m.mode_count, (size_t)g->width * (size_t)g->height,
                              cudaMemcpyDeviceToHost, stream->handle);
    if (err == cudaSuccess)
        err = cudaStreamSynchronize(stream->handle);
    if (err == cudaSuccess)
        fm_mog2_untile(g, tiles, PyArray_DATA((PyArrayObject *)arrays[FM_MOG2_SNAP_WEIGHT]),
                       PyArray_DATA((PyArrayObject *)arrays[FM_MOG2_SNAP_VARIANCE]),
                       PyArray_DATA((PyArrayObject *)arrays[FM_MOG2_SNAP_MEAN]));
    Py_END_ALLOW_THREADS
    if (err != cudaSuccess) {
        fm_cuda_error(st, err, "copying a MOG2 model to the host");
        goto unlock;
    }
    snapshot = fm_mog2_snapshot_dict(&self->base, arrays);
unlock:
    fm_mog2_unlock(&self->base);
exit_device:
    fm_device_exit(&guard);
    PyMem_RawFree(tiles);
    fm_mog2_snapshot_arrays_clear(arrays);
    return snapshot;
}

static PyObject *MOG2_snapshot(PyObject *op, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"stream", NULL};
    fm_state *st = fm_state_of(op);
    fm_MOG2 *self = (fm_MOG2 *)op;
    PyObject *stream_arg = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$O:snapshot", kwlist, &stream_arg))
        return NULL;
    fm_Stream *stream = fm_require_stream(st, stream_arg, self->device);
    /* Held through the call (stream.c's rule): the lock wait releases the GIL. */
    if (stream == NULL || fm_stream_hold(stream) < 0)
        return NULL;
    PyObject *snapshot = snapshot_held(st, self, stream);
    fm_stream_unhold(stream);
    return snapshot;
}

/* The snapshot's arrays into the model just rebuilt (nobody else has it). */
static int restore_held(fm_state *st, fm_MOG2 *self, const fm_mog2_snapshot *s,
                        fm_Stream *stream)
{
    fm_device_guard guard;
    if (fm_device_enter(st, self->device, &guard) < 0)
        return -1;
    /* copies from pageable memory wait for the stream with the GIL held:
     * what is queued there is waited for first, interruptibly */
    int rc = fm_wait_stream(st, stream, "waiting for the stream before a MOG2 restore");
    if (rc == 0)
        rc = rebuild_model(st, self, &s->geometry, stream);
    /* the padding lanes stay zero, as the model they replace */
    size_t bytes = fm_mog2_modes_bytes(&s->geometry);
    float *tiles = rc == 0 ? PyMem_RawCalloc(1, bytes) : NULL;
    if (rc == 0 && tiles == NULL) {
        PyErr_NoMemory();
        rc = -1;
    }
    if (rc == 0) {
        fm_mog2_model m = model_view(self);
        cudaError_t err, done;
        /* with the GIL held: the weight, variance and mean arrays are the
         * caller's, which another thread could resize */
        fm_mog2_tile(&s->geometry, PyArray_DATA(s->arrays[FM_MOG2_SNAP_WEIGHT]),
                     PyArray_DATA(s->arrays[FM_MOG2_SNAP_VARIANCE]),
                     PyArray_DATA(s->arrays[FM_MOG2_SNAP_MEAN]), tiles);
        /* The sources are pageable and freed when this returns (the tiles
         * here, the snapshot's checked copy of the mode counts by the
         * caller): CUDA does not promise that an asynchronous copy from
         * pageable memory has read it when the call returns, so the copies
         * are waited for. Both sources are this call's alone. */
        Py_BEGIN_ALLOW_THREADS
        err = cudaMemcpyAsync(m.modes, tiles, bytes, cudaMemcpyHostToDevice, stream->handle);
        if (err == cudaSuccess)
            err = cudaMemcpyAsync(m.mode_count, PyArray_DATA(s->arrays[FM_MOG2_SNAP_MODE_COUNT]),
                                  (size_t)PyArray_NBYTES(s->arrays[FM_MOG2_SNAP_MODE_COUNT]),
                                  cudaMemcpyHostToDevice, stream->handle);
        /* waited for even when the second copy failed: the first may be queued */
        done = cudaStreamSynchronize(stream->handle);
        Py_END_ALLOW_THREADS
        if (err == cudaSuccess)
            err = done;
        if (err != cudaSuccess)
            rc = fm_cuda_fail(st, err, "copying a snapshot's model to the GPU");
    }
    PyMem_RawFree(tiles);
    if (rc == 0)
        self->base.frames_seen = s->frames_seen;
    fm_device_exit(&guard);
    return rc;
}

static PyObject *MOG2_restore(PyObject *cls, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"", "stream", NULL};
    fm_state *st = fm_state_of_type((PyTypeObject *)cls);
    PyObject *snapshot, *stream_arg = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$O:restore", kwlist, &snapshot,
                                     &stream_arg))
        return NULL;
    fm_mog2_snapshot s;
    fm_Stream *stream = fm_require_stream(st, stream_arg, -1);
    if (stream == NULL || fm_mog2_snapshot_read(snapshot, &s) < 0)
        return NULL;
    fm_MOG2 *self = NULL;
    PyObject *device = PyLong_FromLong(stream->device);
    if (device != NULL) {
        self = (fm_MOG2 *)fm_mog2_snapshot_subtractor((PyTypeObject *)cls, &s, device);
        Py_DECREF(device);
    }
    if (self != NULL) {
        /* Held through the call (stream.c's rule): the waits release the GIL. */
        if (fm_stream_hold(stream) < 0)
            Py_CLEAR(self);
        else {
            if (restore_held(st, self, &s, stream) < 0)
                Py_CLEAR(self);
            fm_stream_unhold(stream);
        }
    }
    fm_mog2_snapshot_clear(&s);
    return (PyObject *)self;
}

static PyObject *MOG2_get_device(PyObject *op, void *Py_UNUSED(closure))
{
    return PyLong_FromLong(((fm_MOG2 *)op)->device);
}

static PyObject *MOG2_get_model_bytes(PyObject *op, void *Py_UNUSED(closure))
{
    fm_MOG2 *self = (fm_MOG2 *)op;
    return PyLong_FromSize_t(self->model ? self->model->size : 0);
}

static PyObject *MOG2_repr(PyObject *op)
{
    fm_MOG2 *self = (fm_MOG2 *)op;
    const fm_mog2_geometry *g = &self->base.geometry;
    if (self->base.closed)
        return PyUnicode_FromString("<fastmog.BackgroundSubtractorMOG2 closed>");
    if (self->model == NULL)
        return PyUnicode_FromFormat("<fastmog.BackgroundSubtractorMOG2 device=%d no model yet>",
                                    self->device);
    return PyUnicode_FromFormat(
        "<fastmog.BackgroundSubtractorMOG2 device=%d model=%dx%dx%d %s frames=%ld>",
        self->device, g->height, g->width, g->channels, g->is_float ? "float32" : "uint8",
        self->base.frames_seen);
}

static int MOG2_traverse(PyObject *op, visitproc visit, void *arg)
{
    fm_MOG2 *self = (fm_MOG2 *)op;
    Py_VISIT(self->model);
    Py_VISIT(self->mask);
    Py_VISIT(self->batch_masks);
    for (int k = 0; k < self->staging_slots; ++k)
        Py_VISIT(self->staging[k]);
    Py_VISIT(Py_TYPE(op));
    return 0;
}

static int MOG2_clear(PyObject *op)
{
    release_model((fm_MOG2Base *)op);
    return 0;
}

static PyMethodDef MOG2_methods[] = {
    {"apply", (PyCFunction)(void (*)(void))MOG2_apply, METH_FASTCALL | METH_KEYWORDS,
     FM_DOC_MOG2_APPLY},
    {"apply_batch", (PyCFunction)(void (*)(void))MOG2_apply_batch,
     METH_FASTCALL | METH_KEYWORDS,
     FM_DOC_MOG2_APPLY_BATCH},
    {"get_background_image", (PyCFunction)(void (*)(void))MOG2_get_background_image,
     METH_VARARGS | METH_KEYWORDS, FM_DOC_MOG2_GET_BACKGROUND_IMAGE},
    {"getBackgroundImage", (PyCFunction)(void (*)(void))MOG2_get_background_image,
     METH_VARARGS | METH_KEYWORDS, "OpenCV-style alias of get_background_image."},
    {"mode_counts", MOG2_mode_counts, METH_NOARGS, FM_DOC_MOG2_MODE_COUNTS},
    {"snapshot", (PyCFunction)(void (*)(void))MOG2_snapshot, METH_VARARGS | METH_KEYWORDS,
     FM_DOC_MOG2_SNAPSHOT},
    {"restore", (PyCFunction)(void (*)(void))MOG2_restore,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS, FM_DOC_MOG2_RESTORE},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef MOG2_getset[] = {
    {"device", MOG2_get_device, NULL, "CUDA device of the model.", NULL},
    {"model_bytes", MOG2_get_model_bytes, NULL, "Device bytes the model takes.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot MOG2_slots[] = {
    {Py_tp_new, MOG2_new},
    {Py_tp_dealloc, fm_mog2_dealloc},
    {Py_tp_traverse, MOG2_traverse},
    {Py_tp_clear, MOG2_clear},
    {Py_tp_repr, MOG2_repr},
    {Py_tp_methods, MOG2_methods},
    {Py_tp_getset, MOG2_getset},
    {Py_tp_doc, (void *)FM_DOC_MOG2},
    {0, NULL},
};

PyType_Spec fm_mog2_spec = {
    .name = "fastmog.BackgroundSubtractorMOG2",
    .basicsize = sizeof(fm_MOG2),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = MOG2_slots,
};
