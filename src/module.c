/* The _fastmog module: multi-phase init, module state, module functions. */
#define FM_IMPORTS_NUMPY
#include "fastmog.h"

/* ---- CUDA presence ------------------------------------------------------ */

PyDoc_STRVAR(cuda_available_doc,
"cuda_available($module, /)\n--\n\n"
"True if the CUDA driver is loaded and at least one GPU is usable.");

static PyObject *cuda_available(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    (void)cudaGetLastError();
    return PyBool_FromLong(err == cudaSuccess && count > 0);
}

PyDoc_STRVAR(device_count_doc,
"device_count($module, /)\n--\n\n"
"Number of usable CUDA devices; 0 where there is no GPU or driver.");

static PyObject *device_count(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        (void)cudaGetLastError();
        count = 0;
    }
    return PyLong_FromLong(count);
}

PyDoc_STRVAR(cuda_status_doc,
"_cuda_status($module, /)\n--\n\n"
"(error name, error text) of asking the runtime for devices: ('cudaSuccess',\n"
"...) when a GPU is usable. For diagnose().");

static PyObject *cuda_status(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    (void)cudaGetLastError();
    if (err == cudaSuccess && count == 0)
        err = cudaErrorNoDevice;
    return Py_BuildValue("(ss)", cudaGetErrorName(err), cudaGetErrorString(err));
}

PyDoc_STRVAR(versions_doc,
"_versions($module, /)\n--\n\n"
"(runtime version, driver version) as CUDA encodes them (1000*major +\n"
"10*minor); the driver version is 0 where no driver is installed.");

static PyObject *versions(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    int runtime = 0, driver = 0;
    (void)cudaRuntimeGetVersion(&runtime);
    if (cudaDriverGetVersion(&driver) != cudaSuccess)
        driver = 0;
    (void)cudaGetLastError();
    return Py_BuildValue("(ii)", runtime, driver);
}

PyDoc_STRVAR(device_properties_doc,
"device_properties($module, device=None, /)\n--\n\n"
"A dict describing a CUDA device: name, compute capability, memory,\n"
"multiprocessors, L2 cache, PCI bus id.");

static PyObject *device_properties(PyObject *module, PyObject *args)
{
    fm_state *st = fm_state_of_module(module);
    PyObject *device_arg = Py_None;
    int device;
    if (!PyArg_ParseTuple(args, "|O:device_properties", &device_arg))
        return NULL;
    if (fm_resolve_device(st, device_arg, &device) < 0)
        return NULL;
    struct cudaDeviceProp p;
    cudaError_t err = cudaGetDeviceProperties(&p, device);
    if (err != cudaSuccess)
        return fm_cuda_error(st, err, "reading the properties of device %d", device);
    char bus_id[32] = "";
    (void)cudaDeviceGetPCIBusId(bus_id, (int)sizeof bus_id, device);
    (void)cudaGetLastError();
    return Py_BuildValue("{s:i,s:s,s:(ii),s:K,s:i,s:i,s:s}",
                         "device", device, "name", p.name,
                         "compute_capability", p.major, p.minor,
                         "total_memory", (unsigned long long)p.totalGlobalMem,
                         "multiprocessors", p.multiProcessorCount,
                         "l2_cache_bytes", p.l2CacheSize, "pci_bus_id", bus_id);
}

PyDoc_STRVAR(mem_get_info_doc,
"mem_get_info($module, device=None, /)\n--\n\n"
"(free, total) bytes of device memory, as cudaMemGetInfo reports them.");

static PyObject *mem_get_info(PyObject *module, PyObject *args)
{
    fm_state *st = fm_state_of_module(module);
    PyObject *device_arg = Py_None;
    int device;
    fm_device_guard guard;
    if (!PyArg_ParseTuple(args, "|O:mem_get_info", &device_arg))
        return NULL;
    if (fm_resolve_device(st, device_arg, &device) < 0 || fm_device_enter(st, device, &guard) < 0)
        return NULL;
    size_t free_bytes = 0, total = 0;
    cudaError_t err = cudaMemGetInfo(&free_bytes, &total);
    fm_device_exit(&guard);
    if (err != cudaSuccess)
        return fm_cuda_error(st, err, "reading the free memory of device %d", device);
    return Py_BuildValue("(KK)", (unsigned long long)free_bytes, (unsigned long long)total);
}

/* ---- pinned memory -------------------------------------------------------- */

static PyObject *pinned_new(PyObject *module, PyObject *args, PyObject *kwargs,
                            const char *fname, int zero)
{
    static char *kwlist[] = {"shape", "dtype", NULL};
    fm_state *st = fm_state_of_module(module);
    PyArray_Dims shape = {NULL, 0};
    PyArray_Descr *descr = NULL;
    char format[32];
    snprintf(format, sizeof format, "O&|O&:%s", fname);
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, format, kwlist,
                                     PyArray_IntpConverter, &shape,
                                     PyArray_DescrConverter2, &descr))
        return NULL;
    if (descr == NULL)
        descr = PyArray_DescrFromType(NPY_UINT8);
    PyObject *array = NULL;
    if (PyDataType_REFCHK(descr)) {
        PyErr_SetString(PyExc_TypeError, "pinned arrays cannot hold Python objects");
        Py_DECREF(descr);
    }
    else {
        array = fm_pinned_array(st, descr, shape.len, shape.ptr);  /* steals descr */
    }
    PyDimMem_FREE(shape.ptr);
    if (array != NULL && zero)
        memset(PyArray_DATA((PyArrayObject *)array), 0, (size_t)PyArray_NBYTES((PyArrayObject *)array));
    return array;
}

PyDoc_STRVAR(pinned_empty_doc,
"pinned_empty($module, /, shape, dtype=numpy.uint8)\n--\n\n"
"An uninitialised numpy array in page-locked host memory, from fastmog's\n"
"pool. The memory stays valid while any view of the array exists and goes\n"
"back to the pool (not to the OS) after the last one.");

static PyObject *pinned_empty(PyObject *module, PyObject *args, PyObject *kwargs)
{
    return pinned_new(module, args, kwargs, "pinned_empty", 0);
}

PyDoc_STRVAR(pinned_zeros_doc,
"pinned_zeros($module, /, shape, dtype=numpy.uint8)\n--\n\n"
"Like pinned_empty, filled with zeros.");

static PyObject *pinned_zeros(PyObject *module, PyObject *args, PyObject *kwargs)
{
    return pinned_new(module, args, kwargs, "pinned_zeros", 1);
}

PyDoc_STRVAR(pinned_like_doc,
"pinned_like($module, array, /)\n--\n\n"
"An uninitialised pinned array with the shape and dtype of `array` (as\n"
"numpy.empty_like).");

static PyObject *pinned_like(PyObject *module, PyObject *arg)
{
    if (!PyArray_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "array must be a numpy array, not %.200s", Py_TYPE(arg)->tp_name);
        return NULL;
    }
    PyArrayObject *a = (PyArrayObject *)arg;
    PyArray_Descr *descr = PyArray_DESCR(a);
    if (PyDataType_REFCHK(descr)) {
        PyErr_SetString(PyExc_TypeError, "pinned arrays cannot hold Python objects");
        return NULL;
    }
    Py_INCREF(descr);
    return fm_pinned_array(fm_state_of_module(module), descr, PyArray_NDIM(a), PyArray_DIMS(a));
}

PyDoc_STRVAR(is_pinned_doc,
"is_pinned($module, array, /)\n--\n\n"
"True if the numpy array's memory is page-locked (fastmog's, CuPy's,\n"
"PyTorch's or registered with cudaHostRegister). False without a GPU.");

static PyObject *is_pinned(PyObject *module, PyObject *arg)
{
    if (!PyArray_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "array must be a numpy array, not %.200s", Py_TYPE(arg)->tp_name);
        return NULL;
    }
    PyArrayObject *a = (PyArrayObject *)arg;
    if (PyArray_SIZE(a) == 0)
        Py_RETURN_FALSE;
    /* The array's extent: its lowest and highest addressed bytes. */
    const char *lo = PyArray_BYTES(a), *hi = PyArray_BYTES(a);
    for (int i = 0; i < PyArray_NDIM(a); i++) {
        npy_intp span = (PyArray_DIM(a, i) - 1) * PyArray_STRIDE(a, i);
        if (span < 0) lo += span; else hi += span;
    }
    hi += PyArray_ITEMSIZE(a) - 1;
    return PyBool_FromLong(fm_is_pinned_ptr(lo) && fm_is_pinned_ptr(hi));
}

/* ---- caches --------------------------------------------------------------- */

PyDoc_STRVAR(empty_cache_doc,
"empty_cache($module, /)\n--\n\n"
"Returns cached pinned blocks and device memory that no object uses to the\n"
"system. Freeing pinned memory synchronizes the device (CUDA does), so this\n"
"is for the end of a phase, not for the per-frame path.");

static PyObject *empty_cache(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    fm_state *st = fm_state_of_module(module);
    fm_keepalive_sweep(st);
    fm_pinned_pool_clear(&st->pinned);
    if (fm_device_pools_trim(st) < 0)
        return NULL;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(memory_stats_doc,
"memory_stats($module, /)\n--\n\n"
"A dict of fastmog's memory use: pinned bytes in use and cached, the number\n"
"of cudaHostAlloc calls so far, objects waiting for GPU work before release,\n"
"and per device the bytes reserved by and in use from fastmog's pool.");

static PyObject *memory_stats(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    fm_state *st = fm_state_of_module(module);
    PyObject *devices = PyDict_New();
    if (devices == NULL)
        return NULL;
    for (int d = 0; d < FM_MAX_DEVICES; d++) {
        cudaMemPool_t pool = st->device_pools[d];
        if (pool == NULL)
            continue;
        uint64_t reserved = 0, used = 0;
        (void)cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved);
        (void)cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used);
        (void)cudaGetLastError();
        PyObject *key = PyLong_FromLong(d);
        PyObject *value = Py_BuildValue("{s:K,s:K}", "reserved", (unsigned long long)reserved,
                                        "used", (unsigned long long)used);
        if (key == NULL || value == NULL || PyDict_SetItem(devices, key, value) < 0) {
            Py_XDECREF(key);
            Py_XDECREF(value);
            Py_DECREF(devices);
            return NULL;
        }
        Py_DECREF(key);
        Py_DECREF(value);
    }
    return Py_BuildValue("{s:n,s:n,s:n,s:n,s:N}",
                         "pinned_in_use", (Py_ssize_t)st->pinned.bytes_in_use,
                         "pinned_cached", (Py_ssize_t)st->pinned.bytes_cached,
                         "pinned_host_allocs", (Py_ssize_t)st->pinned.n_host_allocs,
                         "pending_releases", (Py_ssize_t)st->keepalive.n,
                         "device_pools", devices);
}

/* ---- module definition ------------------------------------------------------ */

static PyMethodDef module_methods[] = {
    {"cuda_available", cuda_available, METH_NOARGS, cuda_available_doc},
    {"device_count", device_count, METH_NOARGS, device_count_doc},
    {"_cuda_status", cuda_status, METH_NOARGS, cuda_status_doc},
    {"_versions", versions, METH_NOARGS, versions_doc},
    {"device_properties", device_properties, METH_VARARGS, device_properties_doc},
    {"mem_get_info", mem_get_info, METH_VARARGS, mem_get_info_doc},
    {"pinned_empty", (PyCFunction)(void (*)(void))pinned_empty,
     METH_VARARGS | METH_KEYWORDS, pinned_empty_doc},
    {"pinned_zeros", (PyCFunction)(void (*)(void))pinned_zeros,
     METH_VARARGS | METH_KEYWORDS, pinned_zeros_doc},
    {"pinned_like", pinned_like, METH_O, pinned_like_doc},
    {"is_pinned", is_pinned, METH_O, is_pinned_doc},
    {"asgpumat", (PyCFunction)(void (*)(void))fm_asgpumat, METH_VARARGS | METH_KEYWORDS,
     "asgpumat($module, obj, /, *, stream)\n--\n\n"
     "Views a CuPy/PyTorch (CUDA Array Interface or DLPack) array as a GpuMat\n"
     "without copying, keeping its owner alive. `stream` is made to wait (on\n"
     "the GPU) for the producer's pending work."},
    {"empty_cache", empty_cache, METH_NOARGS, empty_cache_doc},
    {"memory_stats", memory_stats, METH_NOARGS, memory_stats_doc},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject *add_type(PyObject *module, PyType_Spec *spec, int public)
{
    PyTypeObject *type = (PyTypeObject *)PyType_FromModuleAndSpec(module, spec, NULL);
    if (type == NULL)
        return NULL;
    if (public && PyModule_AddType(module, type) < 0) {
        Py_DECREF(type);
        return NULL;
    }
    return type;
}

static int module_exec(PyObject *module)
{
    fm_state *st = fm_state_of_module(module);
    if (PyArray_ImportNumPyAPI() < 0)
        return -1;
    st->Stream_type = add_type(module, &fm_stream_spec, 1);
    if (st->Stream_type == NULL)
        return -1;
    st->Event_type = add_type(module, &fm_event_spec, 1);
    if (st->Event_type == NULL)
        return -1;
    st->GpuMat_type = add_type(module, &fm_gpumat_spec, 1);
    if (st->GpuMat_type == NULL)
        return -1;
    st->DeviceBuffer_type = add_type(module, &fm_device_buffer_spec, 0);
    if (st->DeviceBuffer_type == NULL)
        return -1;
    st->PinnedBuffer_type = add_type(module, &fm_pinned_buffer_spec, 0);
    if (st->PinnedBuffer_type == NULL)
        return -1;
    st->Timer_type = add_type(module, &fm_timer_spec, 0);
    if (st->Timer_type == NULL
        || PyModule_AddObjectRef(module, "_Timer", (PyObject *)st->Timer_type) < 0)
        return -1;
    st->active_timer = PyContextVar_New("fastmog.active_timer", NULL);
    if (st->active_timer == NULL)
        return -1;
    if (PyModule_AddFunctions(module, fm_nvtx_methods) < 0
        || PyModule_AddFunctions(module, fm_timer_methods) < 0)
        return -1;
    if (PyModule_AddFunctions(module, fm_nv12_host_methods) < 0) return -1;  /* issue 11: nv12_host.c */
    fm_nvtx_init(st);
    st->MOG2_type = add_type(module, &fm_mog2_spec, 1);
    if (st->MOG2_type == NULL || fm_mog2_add_settings(st->MOG2_type) < 0)
        return -1;
    st->MOG2Host_type = add_type(module, &fm_mog2_host_spec, 0);
    if (st->MOG2Host_type == NULL || fm_mog2_add_settings(st->MOG2Host_type) < 0
        || PyModule_AddObjectRef(module, "_HostBackgroundSubtractorMOG2",
                                 (PyObject *)st->MOG2Host_type) < 0)
        return -1;
    st->CudaError = PyErr_NewExceptionWithDoc(
        "fastmog.CudaError",
        "A CUDA call failed. Attributes: name (e.g. 'cudaErrorMemoryAllocation'),\n"
        "code (the cudaError_t value) and operation (what fastmog was doing).",
        PyExc_RuntimeError, NULL);
    if (st->CudaError == NULL || PyModule_AddObjectRef(module, "CudaError", st->CudaError) < 0)
        return -1;
    return 0;
}

static int module_traverse(PyObject *module, visitproc visit, void *arg)
{
    fm_state *st = fm_state_of_module(module);
    Py_VISIT(st->Stream_type);
    Py_VISIT(st->Event_type);
    Py_VISIT(st->GpuMat_type);
    Py_VISIT(st->DeviceBuffer_type);
    Py_VISIT(st->PinnedBuffer_type);
    Py_VISIT(st->MOG2_type);
    Py_VISIT(st->MOG2Host_type);
    Py_VISIT(st->Timer_type);
    Py_VISIT(st->active_timer);
    Py_VISIT(st->CudaError);
    for (size_t i = 0; i < st->keepalive.n; i++)
        Py_VISIT(st->keepalive.items[i].obj);
    return 0;
}

static int module_clear(PyObject *module)
{
    fm_state *st = fm_state_of_module(module);
    fm_keepalive_clear(st);
    Py_CLEAR(st->Stream_type);
    Py_CLEAR(st->Event_type);
    Py_CLEAR(st->GpuMat_type);
    Py_CLEAR(st->DeviceBuffer_type);
    Py_CLEAR(st->PinnedBuffer_type);
    Py_CLEAR(st->MOG2_type);
    Py_CLEAR(st->MOG2Host_type);
    Py_CLEAR(st->Timer_type);
    Py_CLEAR(st->active_timer);
    Py_CLEAR(st->CudaError);
    return 0;
}

static void module_free(void *module)
{
    fm_state *st = fm_state_of_module((PyObject *)module);
    module_clear((PyObject *)module);
    fm_pinned_pool_clear(&st->pinned);
    PyMem_Free(st->pinned.free_blocks);
    st->pinned.free_blocks = NULL;
    fm_fences_clear(st);
    fm_device_pools_release(st);
}

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, module_exec},
    {0, NULL},
};

PyModuleDef fm_module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "fastmog._fastmog",
    .m_doc = "MOG2 background subtraction on NVIDIA GPUs (C extension).",
    .m_size = sizeof(fm_state),
    .m_methods = module_methods,
    .m_slots = module_slots,
    .m_traverse = module_traverse,
    .m_clear = module_clear,
    .m_free = module_free,
};

PyMODINIT_FUNC PyInit__fastmog(void)
{
    return PyModuleDef_Init(&fm_module_def);
}
