/* The _fastmog module itself: multi-phase init, module state, and the
 * traverse/clear/free of that state. Every other file exports its types and
 * functions; this one only puts them together. */
#define FM_IMPORTS_NUMPY
#include "fastmog.h"

static PyTypeObject *add_type(PyObject *module, PyType_Spec *spec, PyTypeObject *base,
                              const char *public_name)
{
    PyTypeObject *type = (PyTypeObject *)PyType_FromModuleAndSpec(module, spec,
                                                                 (PyObject *)base);
    if (type == NULL)
        return NULL;
    if (public_name != NULL
        && PyModule_AddObjectRef(module, public_name, (PyObject *)type) < 0) {
        Py_DECREF(type);
        return NULL;
    }
    return type;
}

static int add_subtractor(PyObject *module, PyTypeObject **slot, PyType_Spec *spec,
                          PyTypeObject *base, const char *extra, const char *public_name)
{
    *slot = fm_mog2_make_type(module, spec, base, extra);
    return *slot == NULL ? -1 : PyModule_AddObjectRef(module, public_name, (PyObject *)*slot);
}

static PyMethodDef *const method_tables[] = {
    fm_device_methods, fm_pinned_methods, fm_devmem_methods, fm_transfer_methods,
    fm_nvtx_methods, fm_timer_methods, fm_mog2_params_methods, fm_mog2_methods_module,
    fm_mog2_cpu_methods_module, fm_nv12_methods,
    fm_nv12_cpu_methods, fm_morphology_methods, fm_morphology_cpu_methods,
    fm_components_cpu_methods, fm_components_methods,
};

static int module_exec(PyObject *module)
{
    fm_state *st = fm_state_of_module(module);
    if (PyArray_ImportNumPyAPI() < 0)
        return -1;
    st->CudaError = PyErr_NewExceptionWithDoc(
        "fastmog.CudaError",
        "A CUDA call failed. Attributes: name (e.g. 'cudaErrorMemoryAllocation'),\n"
        "code (the cudaError_t value) and operation (what fastmog was doing).",
        PyExc_RuntimeError, NULL);
    if (st->CudaError == NULL || PyModule_AddObjectRef(module, "CudaError", st->CudaError) < 0)
        return -1;
    if ((st->Stream_type = add_type(module, &fm_stream_spec, NULL, "Stream")) == NULL
        || (st->Event_type = add_type(module, &fm_event_spec, NULL, "Event")) == NULL
        || (st->GpuMat_type = add_type(module, &fm_gpumat_spec, NULL, "GpuMat")) == NULL
        || (st->DeviceBuffer_type = add_type(module, &fm_device_buffer_spec, NULL, NULL)) == NULL
        || (st->PinnedBuffer_type = add_type(module, &fm_pinned_buffer_spec, NULL, NULL)) == NULL
        || (st->Timer_type = add_type(module, &fm_timer_spec, NULL, "_Timer")) == NULL
        || (st->MOG2Base_type = add_type(module, &fm_mog2_base_spec, NULL, NULL)) == NULL)
        return -1;
    if (add_subtractor(module, &st->MOG2_type, &fm_mog2_spec, st->MOG2Base_type, "device=None",
                       "BackgroundSubtractorMOG2") < 0
        || add_subtractor(module, &st->MOG2Cpu_type, &fm_mog2_cpu_spec, st->MOG2Base_type, NULL,
                          "_CpuBackgroundSubtractorMOG2") < 0)
        return -1;
    for (size_t i = 0; i < sizeof method_tables / sizeof method_tables[0]; i++)
        if (PyModule_AddFunctions(module, method_tables[i]) < 0)
            return -1;
    st->active_timer = PyContextVar_New("fastmog.active_timer", NULL);
    if (st->active_timer == NULL)
        return -1;
    fm_nvtx_init(st);
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
    Py_VISIT(st->MOG2Base_type);
    Py_VISIT(st->MOG2_type);
    Py_VISIT(st->MOG2Cpu_type);
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
    Py_CLEAR(st->MOG2Base_type);
    Py_CLEAR(st->MOG2_type);
    Py_CLEAR(st->MOG2Cpu_type);
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
    fm_fences_clear(st);
    fm_device_pools_release(st);
    fm_gates_clear(st);
}

/* The state holds CUDA handles and process-wide caches: one interpreter, with
 * the GIL. A free-threaded CPython turns the GIL on to import it (and says
 * so): the pinned pool, the fences, each stream's keep-alive list and hold
 * count and a timer's records are plain C structures the GIL guards today
 * (docs/install.md, free-threaded Python, says what going without it needs). */
static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, module_exec},
#ifdef Py_mod_multiple_interpreters
    {Py_mod_multiple_interpreters, Py_MOD_MULTIPLE_INTERPRETERS_NOT_SUPPORTED},
#endif
#ifdef Py_mod_gil
    {Py_mod_gil, Py_MOD_GIL_USED},
#endif
    {0, NULL},
};

PyModuleDef fm_module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "fastmog._fastmog",
    .m_doc = "MOG2 background subtraction on NVIDIA GPUs (C extension).",
    .m_size = sizeof(fm_state),
    .m_slots = module_slots,
    .m_traverse = module_traverse,
    .m_clear = module_clear,
    .m_free = module_free,
};

PyMODINIT_FUNC PyInit__fastmog(void)
{
    return PyModuleDef_Init(&fm_module_def);
}
