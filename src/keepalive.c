/* What the GPU may still use: objects kept alive until the work that uses
 * their memory is done (the numpy source of an asynchronous upload, the
 * destination of a non-blocking download, a staging buffer, foreign device
 * memory), and the pool of untimed events that fence those lifetimes. */
#include "fastmog.h"

/* ---- event stacks: fences here, timing events in timer.c ----------------- */

int fm_event_stack_pop(fm_state *st, fm_event_stack *stack, unsigned flags, int device,
                       cudaEvent_t *event)
{
    if (stack->n > 0) {
        *event = stack->events[--stack->n];
        return 0;
    }
    FM_CUDA_CHECK(st, cudaEventCreateWithFlags(event, flags),
                  "creating an event on device %d", device);
    return 0;
}

void fm_event_stack_push(fm_event_stack *stack, cudaEvent_t event)
{
    if (stack->n == stack->cap) {
        size_t cap = stack->cap ? 2 * stack->cap : 16;
        cudaEvent_t *grown = PyMem_Realloc(stack->events, cap * sizeof(*grown));
        if (grown == NULL) {
            (void)cudaEventDestroy(event);  /* cannot cache it: drop it */
            return;
        }
        stack->events = grown;
        stack->cap = cap;
    }
    stack->events[stack->n++] = event;
}

void fm_event_stack_clear(fm_event_stack *stack)
{
    for (size_t i = 0; i < stack->n; i++)
        (void)cudaEventDestroy(stack->events[i]);
    PyMem_Free(stack->events);
    stack->events = NULL;
    stack->n = stack->cap = 0;
}

int fm_fence_acquire(fm_state *st, int device, cudaEvent_t *event)
{
    return fm_event_stack_pop(st, &st->fences[device], cudaEventDisableTiming, device, event);
}

void fm_fence_release(fm_state *st, int device, cudaEvent_t event)
{
    fm_event_stack_push(&st->fences[device], event);
}

void fm_fences_clear(fm_state *st)
{
    for (int d = 0; d < FM_MAX_DEVICES; d++)
        fm_event_stack_clear(&st->fences[d]);
}

int fm_stream_order(fm_state *st, int device, cudaStream_t producer, cudaStream_t consumer)
{
    cudaEvent_t fence;
    if (producer == consumer)
        return 0;
    if (fm_fence_acquire(st, device, &fence) < 0)
        return -1;
    cudaError_t err = cudaEventRecord(fence, producer);
    if (err == cudaSuccess)
        err = cudaStreamWaitEvent(consumer, fence, 0);
    /* Reusing the event at once is safe: a wait captures the record it saw. */
    fm_fence_release(st, device, fence);
    if (err != cudaSuccess)
        return fm_cuda_fail(st, err, "ordering one stream after another");
    return 0;
}

/* ---- keep-alive list ------------------------------------------------------ */

static int keepalive_reserve(fm_keepalive *list)
{
    if (list->n < list->cap)
        return 0;
    size_t cap = list->cap ? 2 * list->cap : 32;
    fm_pending_release *grown = PyMem_Realloc(list->items, cap * sizeof(*grown));
    if (grown == NULL)
        return -1;
    list->items = grown;
    list->cap = cap;
    return 0;
}

int fm_keepalive_add(fm_state *st, fm_Stream *stream, PyObject *obj)
{
    fm_keepalive *list = &st->keepalive;
    cudaEvent_t event;

    fm_keepalive_sweep(st);
    if (keepalive_reserve(list) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    /* The caller has made stream->device current. */
    if (fm_fence_acquire(st, stream->device, &event) < 0)
        return -1;
    cudaError_t err = cudaEventRecord(event, stream->handle);
    if (err != cudaSuccess) {
        fm_fence_release(st, stream->device, event);
        return fm_cuda_fail(st, err, "recording when a buffer may be released");
    }
    fm_pending_release *item = &list->items[list->n++];
    item->events[0] = event;
    item->n_events = 1;
    item->device = stream->device;
    item->stream = stream->serial;
    item->serial = list->next_serial++;
    item->obj = Py_NewRef(obj);
    return 0;
}

void fm_keepalive_add_fences(fm_state *st, int device, const cudaEvent_t *fences, int n,
                             PyObject *obj)
{
    fm_keepalive *list = &st->keepalive;
    fm_keepalive_sweep(st);
    if (keepalive_reserve(list) < 0) {
        /* No room to remember them: wait here rather than release early. */
        for (int i = 0; i < n; i++) {
            (void)cudaEventSynchronize(fences[i]);
            fm_fence_release(st, device, fences[i]);
        }
        (void)cudaGetLastError();
        return;  /* the caller drops obj */
    }
    fm_pending_release *item = &list->items[list->n++];
    for (int i = 0; i < n; i++)
        item->events[i] = fences[i];
    item->n_events = n;
    item->device = device;
    item->stream = 0;
    item->serial = list->next_serial++;
    item->obj = Py_NewRef(obj);
}

/* Releases the items found done: with `stream` 0 by asking the GPU about
 * each, else those kept for the stream of that serial before `mark`, known
 * done. */
static void release_done(fm_state *st, uint64_t stream, uint64_t mark)
{
    fm_keepalive *list = &st->keepalive;
    if (list->n == 0)
        return;

    /* Collect first, release after: a released object's dealloc may add to
     * this list again. A small batch per sweep keeps the hot path short. */
    enum { BATCH = 64 };
    PyObject *done[BATCH];
    size_t n_done = 0, kept = 0;
    for (size_t i = 0; i < list->n; i++) {
        fm_pending_release item = list->items[i];
        cudaError_t err = n_done < BATCH ? cudaSuccess : cudaErrorNotReady;
        if (stream != 0) {
            if (item.stream != stream || item.serial >= mark)
                err = cudaErrorNotReady;
        }
        else {
            for (int e = 0; e < item.n_events && err != cudaErrorNotReady; e++)
                err = cudaEventQuery(item.events[e]);
        }
        if (err == cudaErrorNotReady) {
            list->items[kept++] = item;
            continue;
        }
        /* Done, or the context is broken and the work will never run:
         * either way nothing on the GPU will touch the object again. */
        (void)cudaGetLastError();
        for (int e = 0; e < item.n_events; e++)
            fm_fence_release(st, item.device, item.events[e]);
        done[n_done++] = item.obj;
    }
    list->n = kept;
    for (size_t i = 0; i < n_done; i++)
        Py_DECREF(done[i]);
}

void fm_keepalive_sweep(fm_state *st)
{
    release_done(st, 0, 0);
}

uint64_t fm_keepalive_mark(fm_state *st)
{
    return st->keepalive.next_serial;
}

void fm_keepalive_sweep_after_wait(fm_state *st, const fm_Stream *stream, uint64_t mark)
{
    /* The per-thread default stream is another stream in each thread: a wait
     * in this one says nothing of the work another thread queued there. */
    if (stream != NULL && stream->serial != 0 && stream->handle != cudaStreamPerThread)
        release_done(st, stream->serial, mark);
    release_done(st, 0, 0);
}

void fm_keepalive_clear(fm_state *st)
{
    fm_keepalive *list = &st->keepalive;
    fm_pending_release *items = list->items;
    size_t n = list->n;
    list->items = NULL;
    list->n = list->cap = 0;
    for (size_t i = 0; i < n; i++) {
        /* Teardown may wait: the GPU could still be reading the memory. */
        for (int e = 0; e < items[i].n_events; e++) {
            (void)cudaEventSynchronize(items[i].events[e]);
            (void)cudaEventDestroy(items[i].events[e]);
        }
        Py_DECREF(items[i].obj);
    }
    PyMem_Free(items);
}
