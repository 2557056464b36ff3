/* Device memory: fastmog's stream-ordered pools and the DeviceBuffer that
 * owns one allocation (or keeps a foreign one alive).
 *
 * THE RULE, owned here (as PyTorch states its allocator's stream rule at the
 * top of CUDACachingAllocator.cpp):
 *
 *   A block goes back to the pool, and a foreign owner is let go, only once
 *   every use of the buffer on every stream has completed on the GPU.
 *
 * - A use is work queued on a stream (fm_device_buffer_use) or handed to a
 *   consumer's stream (fm_device_buffer_consumer_done, DLPack exports).
 * - When use moves to another stream, a fence (an event) is recorded on the
 *   stream it leaves; the release records one on the last stream. The buffer
 *   keeps the events, never the streams: a stream closed or dropped since
 *   still has its fence waited for.
 * - Fences are keyed by the stream's serial number, which is never reused
 *   (an address is: a new Stream at a dropped one's address must not take
 *   over its pending fence); a consumer's raw handle gets a fence of its own
 *   each time.
 * - The release queries the fences: all done, the block is freed (or the
 *   owner dropped) at once; else the block (a capsule that frees it) or the
 *   owner waits on the keep-alive list (keepalive.c) until they are.
 * - So a block is never freed while anything on the GPU may touch it, and the
 *   pool may hand it to any allocation, on any stream, at once: allocating on
 *   the per-thread default stream and using the block on another is safe.
 * - Work that must follow earlier uses on the GPU (FM_USE_AFTER_EARLIER: the
 *   model and masks that calls on several streams rewrite) waits on the same
 *   fences and on the last stream.
 *
 * Shown by tests/robustness/test_lifetimes_gpu.py (test_free_waits_for_closed_stream_use,
 * test_foreign_owner_waits_for_earlier_streams,
 * test_dropped_stream_fence_is_not_taken_over). */
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
        /* Cached blocks of our own, or blocks whose uses are done but not
         * yet swept, may be what is in the way. */
        (void)cudaGetLastError();
        fm_keepalive_sweep(st);
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
 * slot per stream serial; key 0 is never matched). */
static int remember_use(fm_state *st, fm_DeviceBuffer *buf, uint64_t key, cudaStream_t handle)
{
    int slot = -1;
    for (int i = 0; key != 0 && i < buf->n_earlier; i++)
        if (buf->earlier_streams[i] == key)
            slot = i;
    if (slot < 0 && buf->n_earlier == FM_EARLIER_STREAMS_MAX) {
        /* Out of slots: fold the oldest fence into this stream, whose new
         * fence then covers it. */
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
    /* A raw handle says nothing about identity: a slot of its own. */
    int rc = remember_use(st, buf, 0, consumer);
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
    /* A closed stream was synchronized by close(). */
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
        && remember_use(st, buf, previous->serial, previous->handle) < 0)
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

/* A block of ours whose uses are not all done: freed when this capsule is
 * dropped (by the keep-alive sweep, once they are). */
static const char deferred_block_name[] = "fastmog.device_block";

static void deferred_block_free(PyObject *capsule)
{
    void *ptr = PyCapsule_GetPointer(capsule, deferred_block_name);
    int device = (int)(intptr_t)PyCapsule_GetContext(capsule);
    int previous;
    if (ptr != NULL && cudaGetDevice(&previous) == cudaSuccess) {
        if (previous != device)
            (void)cudaSetDevice(device);
        (void)cudaFreeAsync(ptr, cudaStreamPerThread);
        if (previous != device)
            (void)cudaSetDevice(previous);
    }
    (void)cudaGetLastError();
    PyErr_Clear();
}

static PyObject *deferred_block(void *ptr, int device)
{
    PyObject *capsule = PyCapsule_New(ptr, deferred_block_name, deferred_block_free);
    if (capsule != NULL)
        (void)PyCapsule_SetContext(capsule, (void *)(intptr_t)device);  /* valid: cannot fail */
    return capsule;
}

/* Releases the memory (or the foreign owner) by the rule at the top. */
static void buffer_release(fm_state *st, fm_DeviceBuffer *self)
{
    fm_device_guard guard;
    cudaEvent_t fences[FM_RELEASE_FENCES_MAX];
    int n = 0, pending = 0;
    int have_device = fm_device_enter(st, self->device, &guard) == 0;
    if (!have_device)
        PyErr_Clear();
    for (int i = 0; i < self->n_earlier; i++)
        fences[n++] = self->earlier_fences[i];
    self->n_earlier = 0;
    fm_Stream *last = self->last_stream;
    if (have_device && last != NULL && !last->closed) {
        cudaEvent_t fence;
        if (fm_fence_acquire(st, self->device, &fence) == 0) {
            if (cudaEventRecord(fence, last->handle) == cudaSuccess)
                fences[n++] = fence;
            else
                fm_fence_release(st, self->device, fence);
        }
    }
    for (int i = 0; i < n && have_device; i++)
        if (cudaEventQuery(fences[i]) == cudaErrorNotReady)
            pending = 1;
    (void)cudaGetLastError();
    PyErr_Clear();

    PyObject *keep = NULL;  /* what waits for the fences */
    if (self->owner != NULL) {
        keep = self->owner;  /* its reference moves here */
        self->owner = NULL;
    }
    else if (self->ptr != NULL && have_device) {
        if (pending && (keep = deferred_block(self->ptr, self->device)) == NULL) {
            /* No memory to defer it: wait, then free. */
            PyErr_Clear();
            for (int i = 0; i < n; i++)
                (void)cudaEventSynchronize(fences[i]);
            pending = 0;
        }
        if (keep == NULL)
            (void)cudaFreeAsync(self->ptr, cudaStreamPerThread);
    }
    if (pending && keep != NULL) {
        fm_keepalive_add_fences(st, self->device, fences, n, keep);
    }
    else {
        for (int i = 0; i < n; i++)
            fm_fence_release(st, self->device, fences[i]);
    }
    (void)cudaGetLastError();
    self->ptr = NULL;
    Py_XDECREF(keep);
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
