/* Device memory: fastmog's stream-ordered pools and the DeviceBuffer that
 * owns one allocation (or keeps a foreign one alive).
 *
 * Allocation is stream-ordered so that a release never synchronizes the
 * device (cudaFree does): a buffer is freed with cudaFreeAsync on the last
 * stream that used it, after fences for the streams used before. The pools
 * reuse a block only once its free has completed ("opportunistic" reuse
 * alone), and fastmog allocates on the per-thread default stream; so a new
 * block is safe on every stream at once. A buffer whose last stream is gone
 * (closed) is freed on the per-thread stream, after the fences.
 *
 * The rule, owned here: memory is released only after every stream that used
 * it has passed the point of use, ours (fm_device_buffer_use) or a consumer's
 * (fm_device_buffer_consumer_done, for DLPack exports). */
#include "fastmog.h"
#include "docstrings.h"

#define FM_DEVICE_CACHE_BYTES ((uint64_t)512 << 20)

static int device_pool(fm_state *st, int device, cudaMemPool_t *out)
{
    if (st->device_pools[device] != NULL) {
        *out = st->device_pools[device];
        return 0;
    }
    int supported = 0;
    FM_CUDA_CHECK(st, cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, device),
                  "checking device %d for stream-ordered allocation", device);
    if (!supported)
        return fm_cuda_fail(st, cudaErrorNotSupported,
                            "creating a memory pool: device %d has no stream-ordered allocator",
                            device);
    struct cudaMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypeNone;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    cudaMemPool_t pool;
    FM_CUDA_CHECK(st, cudaMemPoolCreate(&pool, &props), "creating a memory pool on device %d", device);

    /* Keep up to this much freed memory cached for reuse at synchronisation
     * points; more goes back to the driver, so other processes are not
     * starved. empty_cache() trims the rest. */
    uint64_t keep = FM_DEVICE_CACHE_BYTES;
    int off = 0;
    cudaError_t err = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
    if (err == cudaSuccess)
        err = cudaMemPoolSetAttribute(pool, cudaMemPoolReuseFollowEventDependencies, &off);
    if (err == cudaSuccess)
        err = cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowInternalDependencies, &off);
    if (err != cudaSuccess) {
        (void)cudaMemPoolDestroy(pool);
        return fm_cuda_fail(st, err, "configuring the memory pool of device %d", device);
    }
    st->device_pools[device] = pool;
    *out = pool;
    return 0;
}

void fm_device_pools_release(fm_state *st)
{
    /* The runtime keeps a pool alive until its last block is freed. */
    for (int d = 0; d < FM_MAX_DEVICES; d++) {
        if (st->device_pools[d] != NULL)
            (void)cudaMemPoolDestroy(st->device_pools[d]);
        st->device_pools[d] = NULL;
    }
}

static int device_pools_trim(fm_state *st)
{
    for (int d = 0; d < FM_MAX_DEVICES; d++) {
        if (st->device_pools[d] != NULL)
            FM_CUDA_CHECK(st, cudaMemPoolTrimTo(st->device_pools[d], 0),
                          "returning cached device memory of device %d", d);
    }
    return 0;
}

static fm_DeviceBuffer *buffer_alloc_object(fm_state *st, int device)
{
    fm_DeviceBuffer *self = PyObject_GC_New(fm_DeviceBuffer, st->DeviceBuffer_type);
    if (self == NULL)
        return NULL;
    self->ptr = NULL;
    self->size = 0;
    self->device = device;
    self->owner = NULL;
    self->last_stream = NULL;
    self->n_earlier = 0;
    PyObject_GC_Track((PyObject *)self);
    return self;
}

fm_DeviceBuffer *fm_device_buffer_alloc(fm_state *st, int device, size_t size,
                                        const char *what)
{
    fm_device_guard guard;
    cudaMemPool_t pool = NULL;
    fm_DeviceBuffer *self = NULL;

    /* Usually a no-op: the callers have entered the device. */
    if (fm_device_enter(st, device, &guard) < 0)
        return NULL;
    if (device_pool(st, device, &pool) < 0)
        goto error;
    self = buffer_alloc_object(st, device);
    if (self == NULL)
        goto error;
    void *ptr = NULL;
    cudaError_t err = cudaMallocFromPoolAsync(&ptr, size, pool, cudaStreamPerThread);
    if (err == cudaErrorMemoryAllocation) {
        /* Cached blocks of our own may be what is in the way. */
        (void)cudaGetLastError();
        (void)cudaMemPoolTrimTo(pool, 0);
        err = cudaMallocFromPoolAsync(&ptr, size, pool, cudaStreamPerThread);
    }
    if (err != cudaSuccess) {
        fm_cuda_error(st, err, "allocating %s (%zu bytes) on device %d", what, size, device);
        goto error;
    }
    self->ptr = ptr;
    self->size = size;
    fm_device_exit(&guard);
    return self;

error:
    fm_device_exit(&guard);
    Py_XDECREF(self);
    return NULL;
}

fm_DeviceBuffer *fm_device_buffer_wrap(fm_state *st, int device, void *ptr,
                                       size_t size, PyObject *owner)
{
    fm_DeviceBuffer *self = buffer_alloc_object(st, device);
    if (self == NULL)
        return NULL;
    self->ptr = ptr;
    self->size = size;
    self->owner = Py_XNewRef(owner);
    return self;
}

/* Records a fence at the current end of `handle`, kept under `key` (one
 * slot per stream), for the release to wait on. */
static int remember_use(fm_state *st, fm_DeviceBuffer *buf, const void *key,
                        cudaStream_t handle)
{
    int slot = -1;
    for (int i = 0; i < buf->n_earlier; i++)
        if (buf->earlier_streams[i] == key)
            slot = i;
    if (slot < 0 && buf->n_earlier == FM_EARLIER_STREAMS_MAX) {
        /* Out of slots: fold the oldest fence into this stream. */
        FM_CUDA_CHECK(st, cudaStreamWaitEvent(handle, buf->earlier_fences[0], 0),
                      "ordering the release of a device buffer");
        fm_fence_release(st, buf->device, buf->earlier_fences[0]);
        memmove(&buf->earlier_streams[0], &buf->earlier_streams[1],
                (FM_EARLIER_STREAMS_MAX - 1) * sizeof buf->earlier_streams[0]);
        memmove(&buf->earlier_fences[0], &buf->earlier_fences[1],
                (FM_EARLIER_STREAMS_MAX - 1) * sizeof buf->earlier_fences[0]);
        buf->n_earlier--;
    }
    if (slot < 0) {
        if (fm_fence_acquire(st, buf->device, &buf->earlier_fences[buf->n_earlier]) < 0)
            return -1;
        slot = buf->n_earlier++;
        buf->earlier_streams[slot] = key;
    }
    FM_CUDA_CHECK(st, cudaEventRecord(buf->earlier_fences[slot], handle),
                  "recording the use of a device buffer");
    return 0;
}

int fm_device_buffer_consumer_done(fm_state *st, fm_DeviceBuffer *buf, cudaStream_t consumer)
{
    fm_device_guard guard;
    if (fm_device_enter(st, buf->device, &guard) < 0)
        return -1;
    /* Tagged in the low bit, so a raw handle never matches a Stream object. */
    int rc = remember_use(st, buf, (const void *)((uintptr_t)consumer | 1), consumer);
    fm_device_exit(&guard);
    return rc;
}

/* Makes `stream` wait for the fences of earlier uses. */
static int wait_for_earlier_uses(fm_state *st, fm_DeviceBuffer *buf, cudaStream_t stream)
{
    for (int i = 0; i < buf->n_earlier; i++)
        FM_CUDA_CHECK(st, cudaStreamWaitEvent(stream, buf->earlier_fences[i], 0),
                      "ordering work after a device buffer's earlier uses");
    return 0;
}

/* Orders `consumer` after every queued use of the buffer. */
static int order_after_uses(fm_state *st, fm_DeviceBuffer *buf, cudaStream_t consumer)
{
    if (wait_for_earlier_uses(st, buf, consumer) < 0)
        return -1;
    fm_Stream *last = buf->last_stream;
    if (last == NULL || last->closed)
        return 0;
    return fm_stream_order(st, buf->device, last->handle, consumer);
}

int fm_device_buffer_use(fm_state *st, fm_DeviceBuffer *buf, fm_Stream *stream,
                         enum fm_use how)
{
    fm_Stream *previous = buf->last_stream;
    if (how == FM_USE_AFTER_EARLIER && order_after_uses(st, buf, stream->handle) < 0)
        return -1;
    if (previous == stream)
        return 0;
    /* A closed stream was synchronized by close(): nothing to fence. */
    if (previous != NULL && !previous->closed
        && remember_use(st, buf, previous, previous->handle) < 0)
        return -1;
    Py_INCREF(stream);
    buf->last_stream = stream;
    Py_XDECREF(previous);
    return 0;
}

int fm_device_buffer_order_before(fm_state *st, fm_DeviceBuffer *buf, cudaStream_t consumer)
{
    fm_device_guard guard;
    if (fm_device_enter(st, buf->device, &guard) < 0)
        return -1;
    int rc = order_after_uses(st, buf, consumer);
    fm_device_exit(&guard);
    return rc;
}

/* Releases the memory (or the foreign owner) after every queued use. */
static void buffer_release(fm_state *st, fm_DeviceBuffer *self)
{
    fm_device_guard guard;
    int have_device = fm_device_enter(st, self->device, &guard) == 0;
    if (!have_device)
        PyErr_Clear();
    fm_Stream *last = self->last_stream;
    int pending = last != NULL && !last->closed;
    cudaStream_t order = pending ? last->handle : cudaStreamPerThread;

    if (have_device)
        (void)wait_for_earlier_uses(st, self, order);
    if (PyErr_Occurred())
        PyErr_Clear();
    for (int i = 0; i < self->n_earlier; i++)
        fm_fence_release(st, self->device, self->earlier_fences[i]);
    self->n_earlier = 0;

    if (self->owner == NULL) {
        if (self->ptr != NULL && have_device)
            (void)cudaFreeAsync(self->ptr, order);
    }
    else if (pending && have_device) {
        /* Foreign memory: its owner frees it, possibly at once; keep the
         * owner until our queued work is done. */
        if (fm_keepalive_add(st, last, self->owner) < 0)
            PyErr_Clear();
    }
    (void)cudaGetLastError();
    self->ptr = NULL;
    Py_CLEAR(self->owner);
    Py_CLEAR(self->last_stream);
    if (have_device)
        fm_device_exit(&guard);
}

static int DeviceBuffer_traverse(PyObject *op, visitproc visit, void *arg)
{
    fm_DeviceBuffer *self = (fm_DeviceBuffer *)op;
    Py_VISIT(self->owner);
    Py_VISIT(self->last_stream);
    Py_VISIT(Py_TYPE(op));
    return 0;
}

static int DeviceBuffer_clear(PyObject *op)
{
    fm_DeviceBuffer *self = (fm_DeviceBuffer *)op;
    fm_saved_error saved = fm_error_save();
    buffer_release(fm_state_of(op), self);
    fm_error_restore(saved);
    return 0;
}

static void DeviceBuffer_dealloc(PyObject *op)
{
    fm_gc_dealloc(op, DeviceBuffer_clear);
}

static PyObject *DeviceBuffer_repr(PyObject *op)
{
    fm_DeviceBuffer *self = (fm_DeviceBuffer *)op;
    return PyUnicode_FromFormat("<fastmog._DeviceBuffer %zu bytes at %p device=%d%s>",
                                self->size, self->ptr, self->device,
                                self->owner ? " foreign" : "");
}

static PyType_Slot DeviceBuffer_slots[] = {
    {Py_tp_dealloc, DeviceBuffer_dealloc},
    {Py_tp_traverse, DeviceBuffer_traverse},
    {Py_tp_clear, DeviceBuffer_clear},
    {Py_tp_repr, DeviceBuffer_repr},
    {Py_tp_doc, (void *)"Owner of one device allocation (internal)."},
    {0, NULL},
};

PyType_Spec fm_device_buffer_spec = {
    .name = "fastmog._DeviceBuffer",
    .basicsize = sizeof(fm_DeviceBuffer),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE
             | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = DeviceBuffer_slots,
};

/* ---- module functions: fastmog's memory caches ------------------------------ */

static PyObject *empty_cache(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    fm_state *st = fm_state_of_module(module);
    fm_keepalive_sweep(st);
    fm_pinned_pool_clear(&st->pinned);
    if (device_pools_trim(st) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *pool_stats(cudaMemPool_t pool)
{
    uint64_t reserved = 0, used = 0;
    (void)cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved);
    (void)cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used);
    (void)cudaGetLastError();
    return Py_BuildValue("{s:K,s:K}", "reserved", (unsigned long long)reserved,
                         "used", (unsigned long long)used);
}

static PyObject *memory_stats(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    fm_state *st = fm_state_of_module(module);
    PyObject *devices = PyDict_New();
    if (devices == NULL)
        return NULL;
    for (int d = 0; d < FM_MAX_DEVICES; d++) {
        if (st->device_pools[d] == NULL)
            continue;
        PyObject *key = PyLong_FromLong(d), *value = pool_stats(st->device_pools[d]);
        int rc = key && value ? PyDict_SetItem(devices, key, value) : -1;
        Py_XDECREF(key);
        Py_XDECREF(value);
        if (rc < 0) {
            Py_DECREF(devices);
            return NULL;
        }
    }
    return Py_BuildValue("{s:n,s:n,s:n,s:n,s:N}",
                         "pinned_in_use", (Py_ssize_t)st->pinned.bytes_in_use,
                         "pinned_cached", (Py_ssize_t)st->pinned.bytes_cached,
                         "pinned_host_allocs", (Py_ssize_t)st->pinned.n_host_allocs,
                         "pending_releases", (Py_ssize_t)st->keepalive.n,
                         "device_pools", devices);
}

PyMethodDef fm_devmem_methods[] = {
    {"empty_cache", empty_cache, METH_NOARGS, FM_DOC_EMPTY_CACHE},
    {"memory_stats", memory_stats, METH_NOARGS, FM_DOC_MEMORY_STATS},
    {NULL, NULL, 0, NULL},
};
