// The floor under apply()'s host cost: a Python extension whose one call
// queues one empty kernel, built by apply_host_cost.py with the machine's
// nvcc, so the benchmark can say how much of a call is CUDA's and how much is
// fastmog's. A benchmark helper, never part of the package.
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>
#include <time.h>

__global__ void empty_kernel() {}

static int launch_on(PyObject *handle)
{
    void *stream = PyLong_AsVoidPtr(handle);
    if (stream == NULL && PyErr_Occurred())
        return -1;
    empty_kernel<<<1, 32, 0, (cudaStream_t)stream>>>();
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) {
        PyErr_Format(PyExc_RuntimeError, "%s: launching an empty kernel", cudaGetErrorName(err));
        return -1;
    }
    return 0;
}

// launch(stream_handle): one empty kernel, what one Python call that queues a
// kernel costs at the least.
static PyObject *launch(PyObject *Py_UNUSED(module), PyObject *handle)
{
    if (launch_on(handle) < 0)
        return NULL;
    Py_RETURN_NONE;
}

// The same launch through the driver's cuLaunchKernel, fetched from the
// runtime (no link to libcuda): what the runtime's layer costs.
static int driver_launch_on(PyObject *handle)
{
    static PFN_cuLaunchKernel_v4000 cu_launch = NULL;
    static CUfunction function = NULL;
    if (cu_launch == NULL) {
        cudaDriverEntryPointQueryResult found;
        cudaError_t err = cudaGetDriverEntryPointByVersion("cuLaunchKernel", (void **)&cu_launch,
                                                           4000, cudaEnableDefault, &found);
        if (err == cudaSuccess)
            err = cudaGetFuncBySymbol(&function, (const void *)empty_kernel);
        if (err != cudaSuccess || found != cudaDriverEntryPointSuccess) {
            cu_launch = NULL;
            PyErr_Format(PyExc_RuntimeError, "%s: finding cuLaunchKernel", cudaGetErrorName(err));
            return -1;
        }
    }
    void *stream = PyLong_AsVoidPtr(handle);
    if (stream == NULL && PyErr_Occurred())
        return -1;
    CUresult res = cu_launch(function, 1, 1, 1, 32, 1, 1, 0, (CUstream)stream, NULL, NULL);
    if (res != CUDA_SUCCESS) {
        PyErr_Format(PyExc_RuntimeError, "CUresult %d: cuLaunchKernel", (int)res);
        return -1;
    }
    return 0;
}

// launch_loop(stream_handle, n, driver=False): nanoseconds per empty kernel
// over n launches from C, the driver's share alone (driver: through
// cuLaunchKernel instead of the runtime).
static PyObject *launch_loop(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *handle;
    long n;
    int driver = 0;
    if (!PyArg_ParseTuple(args, "Ol|p", &handle, &n, &driver))
        return NULL;
    if (n < 1) {
        PyErr_SetString(PyExc_ValueError, "n must be at least 1");
        return NULL;
    }
    int (*one)(PyObject *) = driver ? driver_launch_on : launch_on;
    if (one(handle) < 0)
        return NULL;
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (long k = 0; k < n; ++k)
        if (one(handle) < 0)
            return NULL;
    clock_gettime(CLOCK_MONOTONIC, &end);
    double ns = (end.tv_sec - start.tv_sec) * 1e9 + (end.tv_nsec - start.tv_nsec);
    return PyFloat_FromDouble(ns / n);
}

static PyMethodDef methods[] = {
    {"launch", launch, METH_O, "Queues one empty kernel on the stream handle."},
    {"launch_loop", launch_loop, METH_VARARGS, "Nanoseconds per empty kernel, n from C."},
    {NULL, NULL, 0, NULL},
};

static PyModuleDef_Slot slots[] = {
    {0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_launch_floor", "An empty kernel launch, the benchmark's floor.",
    0, methods, slots, NULL, NULL, NULL,
};

extern "C" PyMODINIT_FUNC PyInit__launch_floor(void)
{
    return PyModuleDef_Init(&module_def);
}
