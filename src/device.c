/* Devices: selecting one, asking what there is, and waiting for GPU work
 * without blocking Python (timed by synchronize.c). */
#include "fastmog.h"
#include "docstrings.h"

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

int64_t fm_monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static double now_seconds(void)
{
    return 1e-9 * (double)fm_monotonic_ns();
}

/* When this thread's last wait saw its work done, before it took the GIL
 * back (0: it failed, or the work was done at the first look and the GIL was
 * never let go). The time after it went to getting the GIL from other Python
 * threads, not to the GPU: the timer charges it to them. */
static _Thread_local int64_t wait_done_ns;

int64_t fm_wait_done_ns(void)
{
    return wait_done_ns;
}

/* Polls until the work is done. The first milliseconds spin (short GPU work
 * is the common case and sleeping would add latency); after that the thread
 * sleeps between polls. Every 20 ms the GIL is taken back to let Ctrl-C in. */
static int wait_until_done(fm_state *st, fm_query_fn query, void *handle,
                           const char *what)
{
    wait_done_ns = 0;
    cudaError_t err = query(handle);
    if (err == cudaSuccess)
        return 0;           /* the GIL was held throughout: nothing to charge it */
    if (err != cudaErrorNotReady)
        return fm_cuda_fail(st, err, "%s", what);

    const double start = now_seconds();
    for (;;) {
        Py_BEGIN_ALLOW_THREADS
        const double slice_end = now_seconds() + 0.020;
        for (;;) {
            err = query(handle);
            if (err != cudaErrorNotReady) {
                if (err == cudaSuccess)
                    wait_done_ns = fm_monotonic_ns();   /* taking the GIL back comes after */
                break;
            }
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

int fm_wait_stream(fm_state *st, fm_Stream *stream, const char *what)
{
    /* close() from another thread must not destroy the handle meanwhile. */
    stream->uses++;
    int rc = wait_until_done(st, query_stream, (void *)stream->handle, what);
    stream->uses--;
    return rc;
}

cudaError_t fm_driver_function(const char *name, unsigned version, void **fn)
{
    enum cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    *fn = NULL;
#if CUDART_VERSION >= 12050
    cudaError_t err = cudaGetDriverEntryPointByVersion(name, fn, version, cudaEnableDefault,
                                                       &found);
#else
    (void)version;
    cudaError_t err = cudaGetDriverEntryPoint(name, fn, cudaEnableDefault, &found);
#endif
    if (err == cudaSuccess && (found != cudaDriverEntryPointSuccess || *fn == NULL))
        err = cudaErrorSymbolNotFound;
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        *fn = NULL;
    }
    return err;
}

int fm_wait_event(fm_state *st, cudaEvent_t event, const char *what)
{
    return wait_until_done(st, query_event, (void *)event, what);
}

static PyObject *query_result(fm_state *st, cudaError_t err, const char *what)
{
    if (err == cudaSuccess)
        Py_RETURN_TRUE;
    if (err == cudaErrorNotReady) {
        (void)cudaGetLastError();
        Py_RETURN_FALSE;
    }
    return fm_cuda_error(st, err, "%s", what);
}

PyObject *fm_query(fm_state *st, int device, cudaStream_t stream, cudaEvent_t event)
{
    fm_device_guard guard;
    if (fm_device_enter(st, device, &guard) < 0)
        return NULL;
    cudaError_t err = event != NULL ? cudaEventQuery(event) : cudaStreamQuery(stream);
    fm_device_exit(&guard);
    return query_result(st, err, event != NULL ? "querying an event" : "querying a stream");
}

/* ---- module functions: what devices there are ------------------------------ */

/* Asks the runtime for devices: cudaSuccess with count > 0 when a GPU is
 * usable, cudaErrorNoDevice when there is none, else why not. Never raises. */
static cudaError_t probe_devices(int *count)
{
    *count = 0;
    cudaError_t err = cudaGetDeviceCount(count);
    (void)cudaGetLastError();
    if (err != cudaSuccess)
        *count = 0;
    else if (*count == 0)
        err = cudaErrorNoDevice;
    return err;
}

static PyObject *cuda_available(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    int count;
    return PyBool_FromLong(probe_devices(&count) == cudaSuccess);
}

static PyObject *device_count(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    int count;
    (void)probe_devices(&count);
    return PyLong_FromLong(count);
}

static PyObject *cuda_status(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    int count;
    cudaError_t err = probe_devices(&count);
    return Py_BuildValue("(ss)", cudaGetErrorName(err), cudaGetErrorString(err));
}

static PyObject *versions(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    int runtime = 0, driver = 0;
    (void)cudaRuntimeGetVersion(&runtime);
    if (cudaDriverGetVersion(&driver) != cudaSuccess)
        driver = 0;
    (void)cudaGetLastError();
    return Py_BuildValue("(ii)", runtime, driver);
}

/* Reads the optional positional `device` of a module function (None: the
 * current device) and checks that it exists; `format` is "|O:name". */
static int device_of_args(fm_state *st, PyObject *args, const char *format, int *device)
{
    PyObject *device_arg = Py_None;
    if (!PyArg_ParseTuple(args, format, &device_arg))
        return -1;
    return fm_resolve_device(st, device_arg, device);
}

static PyObject *device_properties(PyObject *module, PyObject *args)
{
    fm_state *st = fm_state_of_module(module);
    int device;
    if (device_of_args(st, args, "|O:device_properties", &device) < 0)
        return NULL;
    struct cudaDeviceProp p;
    cudaError_t err = cudaGetDeviceProperties(&p, device);
    if (err != cudaSuccess)
        return fm_cuda_error(st, err, "reading the properties of device %d", device);
    char bus_id[32] = "";
    (void)cudaDeviceGetPCIBusId(bus_id, (int)sizeof bus_id, device);
    (void)cudaGetLastError();
    int least = 0, greatest = 0;
    fm_device_guard guard;
    if (fm_device_enter(st, device, &guard) < 0)
        return NULL;
    err = cudaDeviceGetStreamPriorityRange(&least, &greatest);
    fm_device_exit(&guard);
    if (err != cudaSuccess)
        return fm_cuda_error(st, err, "reading the stream priority range of device %d", device);
    return Py_BuildValue("{s:i,s:s,s:(ii),s:K,s:i,s:i,s:s,s:(ii)}",
                         "device", device, "name", p.name,
                         "compute_capability", p.major, p.minor,
                         "total_memory", (unsigned long long)p.totalGlobalMem,
                         "multiprocessors", p.multiProcessorCount,
                         "l2_cache_bytes", p.l2CacheSize, "pci_bus_id", bus_id,
                         "stream_priorities", least, greatest);
}

static PyObject *mem_get_info(PyObject *module, PyObject *args)
{
    fm_state *st = fm_state_of_module(module);
    int device;
    fm_device_guard guard;
    if (device_of_args(st, args, "|O:mem_get_info", &device) < 0
        || fm_device_enter(st, device, &guard) < 0)
        return NULL;
    size_t free_bytes = 0, total = 0;
    cudaError_t err = cudaMemGetInfo(&free_bytes, &total);
    fm_device_exit(&guard);
    if (err != cudaSuccess)
        return fm_cuda_error(st, err, "reading the free memory of device %d", device);
    return Py_BuildValue("(KK)", (unsigned long long)free_bytes, (unsigned long long)total);
}

PyMethodDef fm_device_methods[] = {
    {"cuda_available", cuda_available, METH_NOARGS, FM_DOC_CUDA_AVAILABLE},
    {"device_count", device_count, METH_NOARGS, FM_DOC_DEVICE_COUNT},
    {"_cuda_status", cuda_status, METH_NOARGS, FM_DOC_CUDA_STATUS},
    {"_versions", versions, METH_NOARGS, FM_DOC_VERSIONS},
    {"device_properties", device_properties, METH_VARARGS, FM_DOC_DEVICE_PROPERTIES},
    {"mem_get_info", mem_get_info, METH_VARARGS, FM_DOC_MEM_GET_INFO},
    {NULL, NULL, 0, NULL},
};
