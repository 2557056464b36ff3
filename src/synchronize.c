/* Stream.synchronize and Event.synchronize: one timed call around an
 * interruptible wait. Not in device.c with the waits: it calls the timer, and
 * the timer waits through device.c. */
#include "fastmog.h"

PyObject *fm_synchronize(fm_state *st, const char *name, PyObject *timer, fm_Stream *stream,
                         int device, cudaEvent_t event, uintptr_t recorded_on)
{
    fm_device_guard guard;
    fm_call call;
    if (event == NULL && fm_stream_hold(stream) < 0)
        return NULL;
    PyObject *result = NULL;
    if (fm_call_begin(st, &call, name, NULL, timer, event ? NULL : stream, 0, 0, 0) < 0)
        goto out;
    if (fm_device_enter(st, device, &guard) < 0) {
        result = fm_call_end(st, &call, NULL);
        goto out;
    }
    if (event != NULL)
        fm_call_wait_for_stream(&call, recorded_on);
    const uint64_t mark = fm_keepalive_mark(st);
    fm_call_wait_begin(st, &call);
    int rc = event != NULL ? fm_wait_event(st, event, "waiting for an event")
                           : fm_wait_stream(st, stream, "synchronizing a stream");
    fm_call_wait_end(st, &call);
    fm_device_exit(&guard);
    if (rc == 0) {
        call.drained = event == NULL;
        fm_keepalive_sweep_after_wait(st, event == NULL ? stream : NULL, mark);
    }
    result = fm_call_end(st, &call, rc == 0 ? Py_NewRef(Py_None) : NULL);
out:
    if (event == NULL)
        fm_stream_unhold(stream);
    return result;
}
