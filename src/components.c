/* fastmog._connected_components: the regions of a uint8 mask labelled on the
 * GPU (cuda/components.cu), bit for bit fastmog.cpu.connected_components'
 * and cv2.connectedComponentsWithStats'. Only the regions' rows come back:
 * the last pass writes them into page-locked host memory itself, and the
 * call waits for that pass (an event after it), never for the stream's
 * later work or the device; rows past the first read follow in a copy. */
#include "fastmog.h"
#include "docstrings.h"
#include "components_launch.h"

_Static_assert(sizeof(fm_cc_header) == sizeof(fm_cc_row), "the header takes a row's slot");

/* Rows read with the header before the count is known, at least: a header
 * and 40 rows make 984 bytes. At most FIRST_ROWS_MAX: the rows pass writes
 * these across the bus a row at a time, which is slower than a copy for
 * the 130,000 rows of a frame of noise (2.2 against 1.4 ms), so the rest
 * come in a copy. */
#define FIRST_ROWS_MIN 40
#define FIRST_ROWS_MAX 1024

/* A row's 48-bit coordinate sum. */
static uint64_t sum48(const uint16_t *v)
{
    return (uint64_t)v[0] | (uint64_t)v[1] << 16 | (uint64_t)v[2] << 32;
}

/* Keeps pinned `owner` until the work queued so far on `stream`, which
 * writes into it, is done: after an error, with the exception kept. */
static void keep_until_done(fm_state *st, fm_Stream *stream, PyObject *owner)
{
    fm_saved_error e = fm_error_save();
    if (fm_keepalive_add(st, stream, owner) < 0) {
        PyErr_Clear();
        (void)cudaStreamSynchronize(stream->handle);
        (void)cudaGetLastError();
    }
    fm_error_restore(e);
}

/* Waits for the work queued so far on `stream`, which writes into pinned
 * `owner` (the rows pass itself, or a copy), and for nothing queued after
 * it. A wait cut short (Ctrl-C) leaves that work queued: the owner is
 * then kept until it is done. */
static int await_host(fm_state *st, fm_Stream *stream, PyObject *owner, fm_call *call)
{
    cudaEvent_t done;
    int rc = -1;
    if (fm_fence_acquire(st, stream->device, &done) == 0) {
        cudaError_t err = cudaEventRecord(done, stream->handle);
        if (err != cudaSuccess)
            rc = fm_cuda_fail(st, err, "waiting for the regions");
        else {
            fm_call_wait_begin(st, call);
            rc = fm_wait_event(st, done, "waiting for the regions");
            fm_call_wait_end(st, call);
        }
        fm_fence_release(st, stream->device, done);
    }
    if (rc < 0)
        keep_until_done(st, stream, owner);
    return rc;
}

/* Copies `bytes` from device `src` into pinned `dst` (owned by `owner`) on
 * `stream` and waits for that copy alone (await_host). */
static int read_back(fm_state *st, fm_Stream *stream, void *dst, const void *src, size_t bytes,
                     PyObject *owner, fm_call *call)
{
    cudaError_t err = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream->handle);
    if (err != cudaSuccess)
        return fm_cuda_fail(st, err, "reading back the regions");
    return await_host(st, stream, owner, call);
}

/* (stats N x 5 int32, centroids N x 2 float64, pixels, labels) from `n`
 * rows: each centroid is a coordinate sum over the area, in double, as
 * OpenCV divides; pixels, those of every region, the small ones too;
 * labels, the label image or None.
 *
 * A stack of `images` images of `band` rows (images > 1): each row's y and
 * y sum are its own image's (the sums are exact integers: the centroid is
 * divided as for that image alone), pixels is the tuple of each image's
 * foreground count (`counts`), and labels becomes the tuple of the index
 * of each image's first row and of the end: (stats, centroids, counts,
 * starts). */
static PyObject *regions_of(const fm_cc_row *rows, int n, unsigned long long pixels,
                            PyObject *labels, int images, int band, const uint64_t *counts)
{
    npy_intp sdims[2] = {n, 5}, cdims[2] = {n, 2};
    PyObject *stats = PyArray_SimpleNew(2, sdims, NPY_INT32);
    PyObject *centroids = PyArray_SimpleNew(2, cdims, NPY_FLOAT64);
    PyObject *result = NULL;
    if (stats != NULL && centroids != NULL) {
        int32_t *s = PyArray_DATA((PyArrayObject *)stats);
        double *c = PyArray_DATA((PyArrayObject *)centroids);
        PyObject *starts = images > 1 ? PyTuple_New(images + 1) : NULL;
        PyObject *per_image = images > 1 ? PyTuple_New(images) : NULL;
        int image = 0;
        for (int i = 0; i < n && (images == 1 || (starts != NULL && per_image != NULL)); i++) {
            const fm_cc_row *r = &rows[i];
            const int at = images > 1 ? r->y / band : 0;
            const uint64_t top = (uint64_t)at * (uint64_t)band;
            if (at >= images || at < image - 1) {
                PyErr_Format(PyExc_RuntimeError, "the GPU's row %d lies in image %d of %d, "
                             "out of order", i, at, images);
                break;
            }
            for (; image <= at && images > 1; image++) {
                PyObject *start = PyLong_FromLong(i);
                if (start == NULL)
                    break;
                PyTuple_SET_ITEM(starts, image, start);
            }
            if (PyErr_Occurred())
                break;
            s[5 * i] = r->x;
            s[5 * i + 1] = (int32_t)(r->y - top);
            s[5 * i + 2] = r->width;
            s[5 * i + 3] = r->height;
            s[5 * i + 4] = r->area;
            c[2 * i] = (double)sum48(r->sum_x) / (double)r->area;
            c[2 * i + 1] = (double)(sum48(r->sum_y) - top * r->area) / (double)r->area;
        }
        if (images == 1 && !PyErr_Occurred())
            result = Py_BuildValue("(OOKO)", stats, centroids, pixels, labels);
        else if (starts != NULL && per_image != NULL && !PyErr_Occurred()) {
            for (; image <= images; image++)
                PyTuple_SET_ITEM(starts, image, PyLong_FromLong(n));
            for (int k = 0; k < images; k++)
                PyTuple_SET_ITEM(per_image, k, PyLong_FromUnsignedLongLong(counts[k]));
            if (!PyErr_Occurred())
                result = Py_BuildValue("(OOOO)", stats, centroids, per_image, starts);
        }
        Py_XDECREF(starts);
        Py_XDECREF(per_image);
    }
    Py_XDECREF(stats);
    Py_XDECREF(centroids);
    return result;
}

/* What the launcher cannot index: with 8-connectivity a mask of W x H has
 * 4 * ceil(W / 2) * ceil(H / 2) slots, at most (W + 1) * (H + 1); the rows
 * are the grid's y, and a row's coordinates are 16 bits. */
static int too_large(int width, int height)
{
    return (long long)(width + 1LL) * (height + 1LL) >= (1LL << 30) || width > FM_CC_MAX_SIDE
           || height > FM_CC_MAX_SIDE;
}

/* What a caller's label image must be, checked before any work: an open
 * H x W int32 one-channel GpuMat (h and w when known, > 0). */
static int check_labels(fm_state *st, PyObject *arg, int h, int w)
{
    fm_GpuMat *m = fm_gpumat_check_open(st, arg, "labels");
    if (m == NULL) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "labels must be True, False or an open int32 GpuMat, "
                     "not %.200s", Py_TYPE(arg)->tp_name);
        return -1;
    }
    if (m->shape.type_num != NPY_INT32 || m->shape.channels != 1) {
        PyErr_SetString(PyExc_TypeError, "labels must be a one-channel int32 GpuMat");
        return -1;
    }
    if (h > 0 && (m->shape.height != h || m->shape.width != w)) {
        PyErr_Format(PyExc_ValueError, "labels is %dx%d, the mask %dx%d", m->shape.width,
                     m->shape.height, w, h);
        return -1;
    }
    return 0;
}

/* A stack of `images` images: each of the same even number of rows (a 2x2
 * block of 8-connectivity never spans two). */
static int check_stack(int height, int images)
{
    if (images > 1 && (height % images != 0 || (height / images) % 2 != 0)) {
        PyErr_Format(PyExc_ValueError, "a stack of %d images needs a height that is %d times "
                     "an even number of rows, not %d", images, images, height);
        return -1;
    }
    return 0;
}

static void refuse_size(int width, int height)
{
    PyErr_Format(PyExc_ValueError, "the mask is %dx%d: the GPU labels fewer than 2^30 pixels "
                 "(counted with one more row and column), at most %d wide and high", width,
                 height, FM_CC_MAX_SIDE);
}

/* Queues the count of the foreground pixels (in the zone) and reads back
 * only the header: (None, None, pixels). */
static PyObject *count_pixels(fm_state *st, fm_GpuMat *mask, fm_GpuMat *zone, int foreground,
                              fm_Stream *stream, fm_call *call)
{
    PyObject *result = NULL;
    fm_DeviceBuffer *out = fm_device_buffer_alloc(st, stream->device, sizeof(fm_cc_header),
                                                  "the foreground count");
    fm_PinnedBuffer *back = out != NULL ? fm_pinned_buffer_new(st, sizeof(fm_cc_header)) : NULL;
    if (back == NULL
        || fm_device_buffer_use(st, mask->buffer, stream, FM_USE_AFTER_EARLIER) < 0
        || (zone != NULL
            && fm_device_buffer_use(st, zone->buffer, stream, FM_USE_AFTER_EARLIER) < 0)
        || fm_device_buffer_use(st, out, stream, FM_USE_RELEASE_AFTER) < 0
        || fm_call_gpu_begin(st, call) < 0)
        goto done;
    fm_call_gpu_submitted(call);
    const fm_image no_zone = {0};
    cudaError_t err = fm_launch_count_foreground(fm_gpumat_image(mask), (unsigned char)foreground,
                                                 zone != NULL ? fm_gpumat_image(zone) : no_zone,
                                                 out->ptr, stream->handle);
    if (err != cudaSuccess) {
        fm_cuda_error(st, err, "counting the foreground of a %dx%d mask", mask->shape.height,
                      mask->shape.width);
        goto done;
    }
    (void)fm_call_gpu_end(st, call);
    if (read_back(st, stream, back->ptr, out->ptr, sizeof(fm_cc_header), (PyObject *)back,
                  call) < 0)
        goto done;
    const int64_t pixels = mask->shape.height * (int64_t)mask->shape.width;
    fm_call_bytes(call, pixels * (zone != NULL ? 2 : 1), (int64_t)sizeof(fm_cc_header));
    result = Py_BuildValue("(OOKO)", Py_None, Py_None,
                           (unsigned long long)((const fm_cc_header *)back->ptr)->pixels,
                           Py_None);
done:
    Py_XDECREF(out);
    Py_XDECREF(back);
    return result;
}

/* _connected_components(mask, connectivity, min_area, foreground, /, *,
 * stream, zone=None, timer=None, rows=-1, count=False, labels=False, images=1,
 * opening=-1)
 *     -> (stats, centroids, pixels, labels)
 * rows: the rows read with the header before the count is known (the rest
 * follow in a second copy), at most FIRST_ROWS_MAX; -1: FIRST_ROWS_MIN, or
 * what the last such call found if more. count: only the pixels are
 * counted, (None, None, pixels, None). labels: False, True (a new int32
 * GpuMat) or the caller's GpuMat to fill with the label image; None in the
 * result when False. images > 1:
 * the mask is a stack of that many images (cameras) of an even number of
 * rows each, labelled apart in one pass; see regions_of for the result.
 * opening 0 or 1: the mask's 3x3 opening or closing is labelled, made in
 * the labelling's first pass (fm_launch_components_opened). */
static PyObject *connected_components(PyObject *module, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"", "", "", "", "stream", "zone", "timer", "rows", "count",
                             "labels", "images", "opening", NULL};
    static const fm_image_rule mask_rule = {FM_DTYPE_BIT(NPY_UINT8), FM_CHANNELS_BIT(1)};
    fm_state *st = fm_state_of_module(module);
    PyObject *mask_arg, *stream_arg = NULL, *zone_arg = Py_None, *timer = NULL, *result = NULL;
    PyObject *labels_arg = Py_False;
    int connectivity, foreground, rows_asked = -1, count = 0, images = 1, opening = -1;
    long long min_area;
    fm_GpuMat *mask = NULL, *zone = NULL, *labels = NULL;
    fm_DeviceBuffer *work = NULL, *out = NULL;
    fm_PinnedBuffer *first = NULL, *rest = NULL;
    fm_device_guard guard;
    fm_call call;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OiLi|$OOOipOii:_connected_components",
                                     kwlist, &mask_arg, &connectivity, &min_area, &foreground,
                                     &stream_arg, &zone_arg, &timer, &rows_asked, &count,
                                     &labels_arg, &images, &opening))
        return NULL;
    if (opening < -1 || opening > 1
        || (opening >= 0 && (connectivity != 8 || zone_arg != Py_None || images != 1
                             || count))) {
        PyErr_Format(PyExc_ValueError, "opening must be -1, 0 or 1 (got %d), and -1 unless "
                     "connectivity is 8 with no zone, one image and no count", opening);
        return NULL;
    }
    if (images < 1 || (images > 1 && (count || labels_arg != Py_False))) {
        PyErr_Format(PyExc_ValueError, "images must be 1 or more (got %d), and 1 with count "
                     "or labels", images);
        return NULL;
    }
    if (count && labels_arg != Py_False) {
        PyErr_SetString(PyExc_ValueError, "count=True gives no labels: labels must be False");
        return NULL;
    }
    if ((connectivity != 4 && connectivity != 8) || foreground < 0 || foreground > 255
        || min_area < 0 || rows_asked < -1) {
        PyErr_Format(PyExc_ValueError, "connectivity must be 4 or 8 (got %d), foreground "
                     "0 to 255 (got %d), min_area at least 0 (got %lld), rows -1 or more "
                     "(got %d)", connectivity, foreground, min_area, rows_asked);
        return NULL;
    }
    fm_host_image host;
    if ((PyArray_Check(mask_arg) && fm_host_image_check(mask_arg, "mask", &mask_rule, &host) < 0)
        || (PyArray_Check(zone_arg)
            && fm_host_image_check(zone_arg, "zone", &mask_rule, &host) < 0))
        return NULL;
    int h = 0, w = 0, c = 0, zh = 0, zw = 0;
    fm_peek_shape(st, mask_arg, &h, &w, &c);
    if (zone_arg != Py_None && PyObject_TypeCheck(zone_arg, st->GpuMat_type)) {
        const fm_image_shape *zs = &((fm_GpuMat *)zone_arg)->shape;
        if (zs->type_num != NPY_UINT8 || zs->channels != 1) {
            PyErr_SetString(PyExc_TypeError, "zone must be a one-channel uint8 mask");
            return NULL;
        }
    }
    if (zone_arg != Py_None) {
        fm_peek_shape(st, zone_arg, &zh, &zw, &c);
        if (h > 0 && zh > 0 && (zh != h || zw != w)) {
            PyErr_Format(PyExc_ValueError, "the zone is %dx%d, the mask %dx%d", zw, zh, w, h);
            return NULL;
        }
    }
    if (too_large(w, h)) {
        refuse_size(w, h);
        return NULL;
    }
    if (labels_arg != Py_False && labels_arg != Py_True
        && check_labels(st, labels_arg, h, w) < 0)
        return NULL;
    if (h > 0 && check_stack(h, images) < 0)
        return NULL;
    fm_Stream *stream = fm_require_stream(st, stream_arg, -1);
    if (stream == NULL || fm_stream_hold(stream) < 0)
        return NULL;
    if (fm_call_begin(st, &call, count ? "foreground_pixels" : "connected_components",
                      count ? "kernel count" : "kernel components", timer, stream, h, w, 1) < 0) {
        fm_stream_unhold(stream);
        return NULL;
    }
    if (fm_device_enter(st, stream->device, &guard) < 0) {
        result = fm_call_end(st, &call, NULL);
        fm_stream_unhold(stream);
        return result;
    }
    if (fm_call_gpu_queue(st, &call) < 0
        || (mask = fm_as_device_image(st, mask_arg, "mask", &mask_rule, stream, NULL,
                                      timer)) == NULL)
        goto done;
    const int height = mask->shape.height, width = mask->shape.width;
    if (too_large(width, height)) {
        refuse_size(width, height);
        goto done;
    }
    if (check_stack(height, images) < 0)
        goto done;
    if (zone_arg != Py_None) {
        if ((zone = fm_as_device_image(st, zone_arg, "zone", &mask_rule, stream, NULL,
                                       timer)) == NULL)
            goto done;
        if (zone->shape.height != height || zone->shape.width != width) {
            PyErr_Format(PyExc_ValueError, "the zone is %dx%d, the mask %dx%d",
                         zone->shape.width, zone->shape.height, width, height);
            goto done;
        }
    }
    if (count) {
        result = count_pixels(st, mask, zone, foreground, stream, &call);
        goto done;
    }
    if (labels_arg != Py_False) {
        const fm_image_shape shape = {height, width, 1, 2, NPY_INT32, 0};
        const fm_image_rule rule = {FM_DTYPE_BIT(NPY_INT32), FM_CHANNELS_BIT(1), height, width,
                                    "the mask", 1, 0};
        if ((labels = fm_gpumat_out(st, labels_arg == Py_True ? Py_None : labels_arg, &rule,
                                    stream->device, &shape)) == NULL)
            goto done;
    }
    const size_t max_rows = fm_cc_max_regions(width, height, connectivity);
    /* the header and the stack's counts: read first, with first_rows rows */
    const size_t head = sizeof(fm_cc_header) + fm_cc_count_slots(images) * sizeof(fm_cc_row);
    const size_t out_bytes = head + max_rows * sizeof(fm_cc_row);
    size_t first_rows = rows_asked >= 0 ? (size_t)rows_asked
                        : st->components_rows > FIRST_ROWS_MIN ? st->components_rows
                                                               : FIRST_ROWS_MIN;
    if (first_rows > FIRST_ROWS_MAX)
        first_rows = FIRST_ROWS_MAX;
    if (first_rows > max_rows)
        first_rows = max_rows;
    /* the scratch and the rows from fastmog's pool: they go back once the
     * stream is past this call */
    if ((work = fm_device_buffer_alloc(st, stream->device,
                                       fm_cc_work_bytes(width, height, connectivity),
                                       "connected components' scratch")) == NULL
        || (out = fm_device_buffer_alloc(st, stream->device, out_bytes,
                                         "connected components' rows")) == NULL
        || (first = fm_pinned_buffer_new(st, head + first_rows * sizeof(fm_cc_row))) == NULL
        || fm_device_buffer_use(st, mask->buffer, stream, FM_USE_AFTER_EARLIER) < 0
        || (zone != NULL
            && fm_device_buffer_use(st, zone->buffer, stream, FM_USE_AFTER_EARLIER) < 0)
        || fm_device_buffer_use(st, work, stream, FM_USE_RELEASE_AFTER) < 0
        || fm_device_buffer_use(st, out, stream, FM_USE_RELEASE_AFTER) < 0
        || (labels != NULL
            && fm_device_buffer_use(st, labels->buffer, stream, FM_USE_AFTER_EARLIER) < 0)
        || fm_call_gpu_begin(st, &call) < 0)
        goto done;
    fm_call_gpu_submitted(&call);           /* several launches: see fastmog.h */
    const fm_image no_zone = {0}, no_labels = {0};
    const fm_image label_image = labels != NULL ? fm_gpumat_image(labels) : no_labels;
    /* the rows pass writes the header and the first rows into `first` itself */
    cudaError_t err =
        opening >= 0
            ? fm_launch_components_opened(fm_gpumat_image(mask), (unsigned char)foreground,
                                          opening, min_area, work->ptr, out->ptr, first->ptr,
                                          first_rows, label_image, stream->handle)
            : fm_launch_components(fm_gpumat_image(mask), (unsigned char)foreground,
                                   zone != NULL ? fm_gpumat_image(zone) : no_zone,
                                   connectivity, min_area, images, work->ptr, out->ptr,
                                   first->ptr, first_rows, label_image, stream->handle);
    if (err != cudaSuccess) {
        fm_cuda_error(st, err, "labelling a %dx%d mask", height, width);
        keep_until_done(st, stream, (PyObject *)first);   /* some passes may be queued */
        goto done;
    }
    (void)fm_call_gpu_end(st, &call);
    if (await_host(st, stream, (PyObject *)first, &call) < 0)
        goto done;
    const fm_cc_header *header = (const fm_cc_header *)first->ptr;
    const int kept = header->kept;
    if (kept < 0 || (size_t)kept > max_rows) {
        PyErr_Format(PyExc_RuntimeError, "the GPU reported %d regions of at most %zu", kept,
                     max_rows);
        goto done;
    }
    const unsigned long long pixels = header->pixels;
    const uint64_t *counts = (const uint64_t *)(header + 1);
    const fm_cc_row *rows = (const fm_cc_row *)((const char *)first->ptr + head);
    size_t read = head + first_rows * sizeof(fm_cc_row);
    if ((size_t)kept > first_rows) {
        /* more than the last calls had: the rest in a second copy */
        const size_t more = (size_t)kept - first_rows;
        if ((rest = fm_pinned_buffer_new(st, (size_t)kept * sizeof(fm_cc_row))) == NULL)
            goto done;
        memcpy(rest->ptr, rows, first_rows * sizeof(fm_cc_row));
        if (read_back(st, stream, (fm_cc_row *)rest->ptr + first_rows,
                      (const char *)out->ptr + head + first_rows * sizeof(fm_cc_row),
                      more * sizeof(fm_cc_row), (PyObject *)rest, &call) < 0)
            goto done;
        rows = (const fm_cc_row *)rest->ptr;
        read += more * sizeof(fm_cc_row);
    }
    if (rows_asked < 0)
        st->components_rows = (size_t)kept;
    /* what the GPU read (the mask, the zone) and what came back to the host */
    fm_call_bytes(&call, (int64_t)width * height * (zone != NULL ? 2 : 1), (int64_t)read);
    result = regions_of(rows, kept, pixels, labels != NULL ? (PyObject *)labels : Py_None,
                        images, height / images, counts);
done:
    fm_device_exit(&guard);
    Py_XDECREF(mask);
    Py_XDECREF(zone);
    Py_XDECREF(labels);
    Py_XDECREF(work);
    Py_XDECREF(out);
    Py_XDECREF(first);
    Py_XDECREF(rest);
    if (PyErr_Occurred())
        Py_CLEAR(result);
    result = fm_call_end(st, &call, result);
    fm_stream_unhold(stream);
    return result;
}

PyMethodDef fm_components_methods[] = {
    {"_connected_components", (PyCFunction)(void (*)(void))connected_components,
     METH_VARARGS | METH_KEYWORDS, FM_DOC_CONNECTED_COMPONENTS},
    {NULL, NULL, 0, NULL},
};
