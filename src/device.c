/* Selecting devices and waiting for GPU work without blocking Python. */
#include "fastmog.h"

#include <time.h>

int fm_device_enter(fm_state *st, int device, fm_device_guard *guard)
{
    guard->changed = 0;
    FM_CUDA_CHECK(st, cudaGetDevice(&guard->previous), "reading the current device");
    if (guard->previous != device) {
        FM_CUDA_CHECK(st, cudaSetDevice(device), "selecting device %d", device);
        guard->changed = 1;
    }
    return 0;
}

void fm_device_exit(fm_device_guard *guard)
{
    if (guard->changed)
        (void)cudaSetDevice(guard->previous);
    guard->changed = 0;
}

int fm_resolve_device(fm_state *st, PyObject *arg, int *device)
{
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess)
        return fm_cuda_fail(st, err, "looking for CUDA devices");
    if (arg == NULL || arg == Py_None) {
        FM_CUDA_CHECK(st, cudaGetDevice(device), "reading the current device");
        return 0;
    }
    if (!PyLong_Check(arg) || PyBool_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "device must be an int or None, not %.200s", Py_TYPE(arg)->tp_name);
        return -1;
    }
    long value = PyLong_AsLong(arg);
    if (value == -1 && PyErr_Occurred())
        return -1;
    if (value < 0 || value >= count) {
        PyErr_Format(PyExc_ValueError,
                     "device=%ld does not exist: this machine has %d CUDA device%s",
                     value, count, count == 1 ? "" : "s");
        return -1;
    }
    *device = (int)value;
    return 0;
}

/* ---- interruptible waits ---------------------------------------------- */

typedef cudaError_t (*fm_query_fn)(void *handle);

static cudaError_t query_stream(void *handle)
{
    return cudaStreamQuery((cudaStream_t)handle);
}

static cudaError_t query_event(void *handle)
{
    return cudaEventQuery((cudaEvent_t)handle);
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Polls until the work is done. The first milliseconds spin (short GPU work
 * is the common case and sleeping would add latency); after that the thread
 * sleeps between polls. Every 20 ms the GIL is taken back to let Ctrl-C in. */
static int wait_until_done(fm_state *st, fm_query_fn query, void *handle,
                           const char *what)
{
    cudaError_t err = query(handle);
    if (err == cudaSuccess)
        return 0;
    if (err != cudaErrorNotReady)
        return fm_cuda_fail(st, err, "%s", what);

    const double start = now_seconds();
    for (;;) {
        Py_BEGIN_ALLOW_THREADS
        const double slice_end = now_seconds() + 0.020;
        for (;;) {
            err = query(handle);
            if (err != cudaErrorNotReady)
                break;
            const double t = now_seconds();
            if (t >= slice_end)
                break;
            if (t - start > 0.002) {
                const struct timespec nap = {0, 50000};  /* 50 us */
                nanosleep(&nap, NULL);
            }
        }
        Py_END_ALLOW_THREADS
        if (err == cudaSuccess)
            return 0;
        if (err != cudaErrorNotReady)
            return fm_cuda_fail(st, err, "%s", what);
        if (PyErr_CheckSignals() < 0)
            return -1;
    }
}

int fm_wait_stream(fm_state *st, cudaStream_t stream, const char *what)
{
    return wait_until_done(st, query_stream, (void *)stream, what);
}

int fm_wait_event(fm_state *st, cudaEvent_t event, const char *what)
{
    return wait_until_done(st, query_event, (void *)event, what);
}
