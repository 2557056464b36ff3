/* Turning CUDA error codes into fastmog.CudaError. */
#include "fastmog.h"

#include <stdarg.h>

/* Errors that mean "there is no usable GPU here" get advice appended. */
static const char *advice_for(cudaError_t err)
{
    switch (err) {
    case cudaErrorInsufficientDriver:
        /* The one build mismatch a user can fix by installing the other
         * distribution (fastmog._diagnose.BUILDS has the same table). */
#if CUDART_VERSION >= 13000
        return "; this fastmog's CUDA 13 runtime needs an NVIDIA driver 580.65.06 or newer: "
               "update the driver, or pip install fastmog-cu12 (drivers 525.60.13 and newer); "
               "fastmog.diagnose() says which driver is loaded";
#else
        return "; this fastmog's CUDA 12 runtime needs an NVIDIA driver 525.60.13 or newer: "
               "update the driver; fastmog.diagnose() says which driver is loaded";
#endif
    case cudaErrorNoDevice:
    case cudaErrorInitializationError:
        return "; no usable NVIDIA GPU: check the driver with nvidia-smi, "
               "or run fastmog.diagnose()";
    case cudaErrorInvalidDevice:
        return "; see fastmog.device_count()";
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorECCUncorrectable:
    case cudaErrorAssert:
        return "; this error is sticky: the CUDA context is lost and every later GPU "
               "call fails until the process restarts";
    default:
        return "";
    }
}

static PyObject *raise_cuda_error(fm_state *st, cudaError_t err,
                                  const char *op_fmt, va_list ap)
{
    PyObject *operation = NULL, *message = NULL, *exc = NULL;
    PyObject *name = NULL, *code = NULL;
    const char *err_name = cudaGetErrorName(err);
    const char *err_text = cudaGetErrorString(err);

    operation = PyUnicode_FromFormatV(op_fmt, ap);
    if (operation == NULL)
        goto error;
    message = PyUnicode_FromFormat("%s: %s (while %U)%s", err_name, err_text,
                                   operation, advice_for(err));
    if (message == NULL)
        goto error;
    exc = PyObject_CallOneArg(st->CudaError, message);
    if (exc == NULL)
        goto error;
    name = PyUnicode_FromString(err_name);
    code = PyLong_FromLong((long)err);
    if (name == NULL || code == NULL
        || PyObject_SetAttrString(exc, "name", name) < 0
        || PyObject_SetAttrString(exc, "code", code) < 0
        || PyObject_SetAttrString(exc, "operation", operation) < 0)
        goto error;
    PyErr_SetObject(st->CudaError, exc);
    /* fall through: the exception now holds what it needs */
error:
    Py_XDECREF(operation);
    Py_XDECREF(message);
    Py_XDECREF(exc);
    Py_XDECREF(name);
    Py_XDECREF(code);
    return NULL;
}

PyObject *fm_cuda_error(fm_state *st, cudaError_t err, const char *op_fmt, ...)
{
    va_list ap;
    va_start(ap, op_fmt);
    raise_cuda_error(st, err, op_fmt, ap);
    va_end(ap);
    /* A non-sticky error stays in the runtime's per-thread slot and would be
     * reported again by the next unrelated cudaGetLastError. */
    (void)cudaGetLastError();
    return NULL;
}

int fm_cuda_fail(fm_state *st, cudaError_t err, const char *op_fmt, ...)
{
    va_list ap;
    va_start(ap, op_fmt);
    raise_cuda_error(st, err, op_fmt, ap);
    va_end(ap);
    (void)cudaGetLastError();
    return -1;
}
