"""Helpers of the GPU lifetime and stress tests: a spin kernel that holds a
stream busy for a set time (so a race window is open on purpose, not by
luck), and a child-process runner for cases that would crash the
interpreter without their fix."""
import os
import subprocess
import sys
import textwrap

_SPIN_SOURCE = r'''
extern "C" __global__ void fastmog_test_spin(unsigned long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}
'''
_kernels = {}


def spin(stream, ms):
    """Queues a kernel on the fastmog `stream` that spins for `ms`
    milliseconds of GPU time (CuPy compiles it)."""
    import cupy
    import numpy as np

    device = stream.device
    if device not in _kernels:
        with cupy.cuda.Device(device):
            _kernels[device] = cupy.RawKernel(_SPIN_SOURCE, "fastmog_test_spin")
    try:
        external = cupy.cuda.Stream.from_external(stream)   # the __cuda_stream__ protocol
    except (AttributeError, TypeError, ValueError):
        external = cupy.cuda.ExternalStream(stream.handle)  # older CuPy
    with cupy.cuda.Device(device), external:
        _kernels[device]((1,), (1,), (np.uint64(int(ms * 1e6)),))


def run_child(code, timeout=120):
    """Runs `code` in a fresh interpreter (this one's sys.path), returning
    (exit status, stdout + stderr). A crash or a hang stays in the child;
    a hang reads as exit status -9 with 'TIMEOUT' in the output."""
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([here] + sys.path)
    prelude = "import faulthandler; faulthandler.enable()\n"
    try:
        proc = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code).strip()],
                              capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"")
        out = out.decode(errors="replace") if isinstance(out, bytes) else out
        return -9, out + "\nTIMEOUT"
    return proc.returncode, proc.stdout + proc.stderr
