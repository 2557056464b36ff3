/* A gate on a stream that the host opens: the GPU waits at it until the host
 * has handed over the work queued behind it, so a timing window recorded
 * after the gate holds the work and none of the host's time to submit it.
 *
 * Why: on a stream with nothing queued the GPU runs a start event at once and
 * then waits for the work. A decoder's output copy is queued from a Python
 * thread while other threads hold the driver's locks: its memcpy call took 16
 * us there, and the copy began about 13 us into it (CUPTI, H100,
 * benchmarks/cupti_check.py), a point no host clock reading can place. Behind
 * a gate the window opens only once the call has returned.
 *
 * The gate is a cuStreamWaitValue32 on one word of pinned host memory that
 * every gate shares: each closing takes the next ticket and waits until the
 * word reaches it; opening raises the word to the ticket, never lowers it, so
 * a gate opened late by one thread cannot shut another's again. The GPU polls
 * the word; the host's write reaches it within a microsecond or two. Streams
 * share the device's hardware queues (8 by default), so work of another
 * stream behind the same queue waits while a gate is shut: it is shut only
 * around one call's submission, with nothing else queued meanwhile. Where
 * the driver lacks stream memory operations gates are off: fm_gate_close
 * leaves gate->closed 0 and the timer falls back to its host-lag estimate. */
#include "fastmog.h"

typedef int (*wait_value_fn)(cudaStream_t stream, unsigned long long addr, uint32_t value,
                             unsigned flags);

/* The driver's cuStreamWaitValue32 and the shared word, made on first use;
 * 0 with st->gates.unavailable set where the driver has no such call. */
static int gates_ready(fm_state *st)
{
    struct fm_gates *g = &st->gates;
    if (g->word != NULL || g->unavailable)
        return 0;
    void *fn = NULL;
    if (fm_driver_function("cuStreamWaitValue32", 11070, &fn) != cudaSuccess) {
        g->unavailable = 1;
        return 0;
    }
    void *word = NULL;
    /* portable and mapped: every device reads it at the same address */
    FM_CUDA_CHECK(st, cudaHostAlloc(&word, 64, cudaHostAllocPortable | cudaHostAllocMapped),
                  "allocating the timer's gate word");
    __atomic_store_n((uint32_t *)word, 0u, __ATOMIC_RELEASE);
    g->wait_value = fn;
    g->word = word;
    g->next = 1;
    return 0;
}

int fm_gate_close(fm_state *st, cudaStream_t stream, fm_gate *gate)
{
    gate->closed = 0;
    if (gates_ready(st) < 0)
        return -1;
    struct fm_gates *g = &st->gates;
    if (g->word == NULL || g->unavailable)
        return 0;
    uint32_t ticket = g->next++;
    /* CU_STREAM_WAIT_VALUE_GEQ (0): until (int32_t)(*word - ticket) >= 0 */
    int rc = ((wait_value_fn)g->wait_value)(stream, (unsigned long long)(uintptr_t)g->word,
                                            ticket, 0);
    if (rc == 801) {
        /* CUDA_ERROR_NOT_SUPPORTED: a driver with stream memory operations
         * turned off; nothing was queued, and the timer does without */
        g->unavailable = 1;
        return 0;
    }
    if (rc != 0)
        return fm_cuda_fail(st, cudaErrorUnknown,
                            "queuing the timer's gate (cuStreamWaitValue32 returned %d)", rc);
    gate->ticket = ticket;
    gate->closed = 1;
    return 0;
}

void fm_gate_open(fm_state *st, fm_gate *gate)
{
    if (!gate->closed)
        return;
    uint32_t *word = st->gates.word;
    uint32_t seen = __atomic_load_n(word, __ATOMIC_ACQUIRE);
    while ((int32_t)(gate->ticket - seen) > 0
           && !__atomic_compare_exchange_n(word, &seen, gate->ticket, 0, __ATOMIC_RELEASE,
                                           __ATOMIC_ACQUIRE))
        ;
    gate->closed = 0;
}

void fm_gates_clear(fm_state *st)
{
    /* Every gate was opened before its call returned: nothing waits on it. */
    if (st->gates.word != NULL)
        (void)cudaFreeHost(st->gates.word);
    st->gates.word = NULL;
}
