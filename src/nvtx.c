/* NVTX ranges in a "fastmog" domain. With no tool attached each call costs a
 * pointer test inside NVTX; fastmog also skips formatting the message unless
 * a timer asks for ranges or set_nvtx(True) was called, and then formats it
 * only when the name or shape changed. */
#include "fastmog.h"

#include <nvtx3/nvToolsExt.h>
#include <stdlib.h>

void fm_nvtx_init(fm_state *st)
{
    st->nvtx_domain = nvtxDomainCreateA("fastmog");
    const char *env = getenv("FASTMOG_NVTX");
    st->nvtx_enabled = env != NULL && env[0] != '\0' && strcmp(env, "0") != 0;
}

/* The message "<name> <h>x<w>x<c>", formatted only when it differs from the
 * last one (the name compared by content: a name from Python may reuse the
 * address of an earlier one). */
static const char *range_message(fm_state *st, const char *name, int height, int width,
                                 int channels)
{
    if (height <= 0)
        return name;
    struct fm_nvtx_message *last = &st->nvtx_last;
    if (last->height == height && last->width == width && last->channels == channels
        && strcmp(last->name, name) == 0)
        return last->text;
    snprintf(last->text, sizeof last->text, "%s %dx%dx%d", name, height, width, channels);
    if (strlen(name) < sizeof last->name) {
        strcpy(last->name, name);
        last->height = height, last->width = width, last->channels = channels;
    } else {
        last->height = 0;            /* too long to remember: never matches */
    }
    return last->text;
}

void fm_nvtx_push(fm_state *st, const char *name, int height, int width, int channels)
{
    nvtxEventAttributes_t attr;
    memset(&attr, 0, sizeof attr);
    attr.version = NVTX_VERSION;
    attr.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    attr.messageType = NVTX_MESSAGE_TYPE_ASCII;
    attr.message.ascii = range_message(st, name, height, width, channels);
    nvtxDomainRangePushEx((nvtxDomainHandle_t)st->nvtx_domain, &attr);
}

void fm_nvtx_pop(fm_state *st)
{
    nvtxDomainRangePop((nvtxDomainHandle_t)st->nvtx_domain);
}

static PyObject *set_nvtx(PyObject *module, PyObject *arg)
{
    int enabled = PyObject_IsTrue(arg);
    if (enabled < 0)
        return NULL;
    fm_state_of_module(module)->nvtx_enabled = enabled;
    Py_RETURN_NONE;
}

static PyObject *get_nvtx(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    return PyBool_FromLong(fm_state_of_module(module)->nvtx_enabled);
}

static PyObject *nvtx_push(PyObject *module, PyObject *arg)
{
    const char *name = PyUnicode_AsUTF8(arg);
    if (name == NULL)
        return NULL;
    fm_nvtx_push(fm_state_of_module(module), name, 0, 0, 0);
    Py_RETURN_NONE;
}

static PyObject *nvtx_pop(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    fm_nvtx_pop(fm_state_of_module(module));
    Py_RETURN_NONE;
}

PyMethodDef fm_nvtx_methods[] = {
    {"set_nvtx", set_nvtx, METH_O,
     "set_nvtx($module, enabled, /)\n--\n\n"
     "Emit an NVTX range for every fastmog call even with no Timer active (for\n"
     "Nsight Systems). Also set by the environment variable FASTMOG_NVTX=1."},
    {"nvtx_enabled", get_nvtx, METH_NOARGS,
     "nvtx_enabled($module, /)\n--\n\nWhether set_nvtx(True) is in effect."},
    {"_nvtx_push", nvtx_push, METH_O, "Pushes a range named `name` in the fastmog domain."},
    {"_nvtx_pop", nvtx_pop, METH_NOARGS, "Pops the innermost fastmog range."},
    {NULL, NULL, 0, NULL},
};
