"""Counts the CUDA runtime API calls a block of code makes, by name, through
CUPTI's callback API (ctypes, no build): torch.profiler cannot do this,
because Kineto drops cudaEventCreate/Record/Destroy/Synchronize from its
traces. CUPTI takes one subscriber per process: use it in a child process
(gpu_race.run_child), never beside torch.profiler."""
import collections
import ctypes
import glob
import os
import sys

_RUNTIME_API = 2          # CUPTI_CB_DOMAIN_RUNTIME_API (cupti_callbacks.h)
_API_ENTER = 0            # CUPTI_API_ENTER
# void (*)(void *userdata, CUpti_CallbackDomain, CUpti_CallbackId, const void *cbdata)
_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p)


class _CallbackData(ctypes.Structure):
    """The head of CUpti_CallbackData: where the call is, and its name."""
    _fields_ = [("callbackSite", ctypes.c_int), ("functionName", ctypes.c_char_p)]


def find_libcupti():
    """libcupti from the toolkit or NVIDIA's wheels, or None."""
    roots = [os.environ.get("CUDA_HOME", ""), "/usr/local/cuda"] + sorted(glob.glob("/usr/local/cuda-*"))
    patterns = [f"{r}/targets/*/lib/libcupti.so*" for r in roots if r]
    patterns += [f"{r}/extras/CUPTI/lib64/libcupti.so*" for r in roots if r]
    patterns += [f"{p}/nvidia/*/lib/libcupti.so*" for p in sys.path if p]
    for pattern in patterns:
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    return None


class CudaCalls:
    """with CudaCalls() as calls: ...; calls.counts is a Counter of the
    runtime API functions entered inside the block."""

    def __init__(self, path=None):
        path = path or find_libcupti()
        if path is None:
            raise RuntimeError("no libcupti found (CUDA_HOME, /usr/local/cuda, nvidia wheels)")
        self._lib = ctypes.CDLL(path)
        self.counts = collections.Counter()
        self._active = False
        self._callback = _CALLBACK(self._on_call)     # kept: CUPTI holds only the pointer
        self._subscriber = ctypes.c_void_p()
        rc = self._lib.cuptiSubscribe(ctypes.byref(self._subscriber), self._callback, None)
        if rc != 0:
            raise RuntimeError(f"cuptiSubscribe failed with CUPTI error {rc}")
        rc = self._lib.cuptiEnableDomain(1, self._subscriber, _RUNTIME_API)
        if rc != 0:
            raise RuntimeError(f"cuptiEnableDomain failed with CUPTI error {rc}")

    def _on_call(self, _userdata, _domain, _cbid, data):
        if self._active:
            head = _CallbackData.from_address(data)
            if head.callbackSite == _API_ENTER:
                self.counts[head.functionName.decode()] += 1

    def __enter__(self):
        self.counts.clear()
        self._active = True
        return self

    def __exit__(self, *exc):
        self._active = False
        return False

    def close(self):
        """Unsubscribes: CUPTI must not call back into an interpreter that
        is shutting down (the child crashed at exit without this)."""
        self._active = False
        self._lib.cuptiEnableDomain(0, self._subscriber, _RUNTIME_API)
        self._lib.cuptiUnsubscribe(self._subscriber)
