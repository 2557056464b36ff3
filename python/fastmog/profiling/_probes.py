"""What the report compares a profile with: the bandwidth ceilings of this
process's GPU (measured once per device, lazily) and NVML's utilization
samples taken while a profile runs (when the driver's NVML is present)."""
from __future__ import annotations

import ctypes
import dataclasses
import threading
import time

import numpy as np

from .. import _fastmog
from ._analysis import Ceilings

_MIB64 = (4096, 16384)              # a 64 MiB uint8 image
_cache: dict[int, Ceilings] = {}
_injected: dict[int, Ceilings] = {}


def set_ceilings(ceilings: Ceilings | None, device: int = 0) -> None:
    """Uses `ceilings` for `device` instead of measuring (None: measure)."""
    if ceilings is None:
        _injected.pop(device, None)
    else:
        _injected[device] = ceilings


def _measure(device: int) -> Ceilings:
    s = _fastmog.Stream(device=device)
    host = _fastmog.pinned_empty(_MIB64, np.uint8)
    host[...] = 1
    a = _fastmog.GpuMat(_MIB64, np.uint8, device=device)
    b = _fastmog.GpuMat(_MIB64, np.uint8, device=device)
    start = _fastmog.Event(device=device)
    end = _fastmog.Event(device=device)
    nbytes = host.nbytes

    def best(op):
        times = []
        for _ in range(4):
            s.record(start)
            op()
            s.record(end)
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        return min(times[1:])

    try:
        h2d = nbytes / best(lambda: a.upload(host, stream=s)) / 1e9
        d2h = nbytes / best(lambda: a.download(host, stream=s, blocking=False)) / 1e9
        d2d = 2 * nbytes / best(lambda: a.copy_to(b, stream=s)) / 1e9
    finally:
        s.synchronize()
        a.close()
        b.close()
        s.close()
    return Ceilings(h2d=h2d, d2h=d2h, device=d2d, source="measured")


def ceilings(device: int = 0) -> Ceilings | None:
    """PCIe each way (a pinned 64 MiB copy) and device memory (a 64 MiB
    device-to-device copy), measured once per process and device, in a
    thread of its own so no active profile records it. None without a GPU."""
    if device in _injected:
        return _injected[device]
    return _once(_cache, device, _measure, "fastmog ceilings")


def _once(cache, device, measure, name):
    """measure(device), once per process and device, on a thread of its own
    (the caller's CUDA state and active profile stay out of it); None where
    it fails (no GPU, no memory: the report says so)."""
    if device in cache:
        return cache[device]
    result: dict = {}

    def run():
        try:
            result["value"] = measure(device)
        except Exception:
            pass

    worker = threading.Thread(target=run, name=name)
    worker.start()
    worker.join()
    if "value" not in result:
        return None
    cache[device] = result["value"]
    return cache[device]


# ---- NVML -----------------------------------------------------------------------

class _Utilization(ctypes.Structure):
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


def _load_nvml():
    """NVML of the driver, loaded at run time; (library, None) or (None, why)."""
    try:
        lib = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError as e:
        return None, f"libnvidia-ml.so.1 not loadable ({e})"
    try:
        if lib.nvmlInit_v2() != 0:
            return None, "nvmlInit failed"
    except AttributeError:
        return None, "libnvidia-ml.so.1 has no nvmlInit_v2"
    return lib, None


class NvmlSampler:
    """Samples SM and decoder utilization of one GPU every `period` seconds
    in a daemon thread while a profile runs. `absent` says why there are no
    samples when NVML cannot be used."""

    def __init__(self, device: int = 0, period: float = 0.02):
        self.device, self.period = device, period
        self.samples: list[tuple[float, int, int]] = []   # (time, SM %, decoder %)
        self.absent: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lib = None
        self._handle = ctypes.c_void_p()

    def start(self) -> "NvmlSampler":
        lib, why = _load_nvml()
        if lib is None:
            self.absent = why
            return self
        if not self._open(lib):
            self.absent = f"NVML does not know CUDA device {self.device}"
            return self
        self._lib = lib
        self._thread = threading.Thread(target=self._run, name="fastmog NVML", daemon=True)
        self._thread.start()
        return self

    def _open(self, lib) -> bool:
        """The NVML handle of CUDA device `device`. NVML numbers GPUs in PCI
        order and CUDA fastest first, so the two numbers can name different
        GPUs: the CUDA device's PCI bus id picks it, the index only where the
        bus id is unknown."""
        try:
            bus = str(_fastmog.device_properties(self.device).get("pci_bus_id") or "")
        except Exception:                    # no GPU, or no such device
            bus = ""
        if bus:
            return lib.nvmlDeviceGetHandleByPciBusId_v2(bus.encode(),
                                                        ctypes.byref(self._handle)) == 0
        return lib.nvmlDeviceGetHandleByIndex_v2(self.device, ctypes.byref(self._handle)) == 0

    def _run(self):
        lib, handle = self._lib, self._handle
        util, dec, period = _Utilization(), ctypes.c_uint(), ctypes.c_uint()
        while not self._stop.is_set():
            if lib.nvmlDeviceGetUtilizationRates(handle, ctypes.byref(util)) == 0:
                d = -1
                if lib.nvmlDeviceGetDecoderUtilization(handle, ctypes.byref(dec),
                                                       ctypes.byref(period)) == 0:
                    d = int(dec.value)
                self.samples.append((time.perf_counter(), int(util.gpu), d))
            self._stop.wait(self.period)

    def stop(self) -> dict:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        return self.summary()

    def summary(self) -> dict:
        if not self.samples:
            return {"absent": self.absent or "no samples"}
        sm = [s[1] for s in self.samples]
        dec = [s[2] for s in self.samples if s[2] >= 0]
        return {"samples": len(self.samples), "sm_percent": sum(sm) / len(sm),
                "decoder_percent": sum(dec) / len(dec) if dec else None}


# ---- the latency of event timing ------------------------------------------------

_bias: dict[int, dict] = {}


def _kind(activity):
    act = activity or ""
    if act == "memcpy HtoD":
        return "HtoD"
    if act == "memcpy DtoH":
        return "DtoH"
    if act in ("memcpy DtoD", "NVDEC output copy"):
        return "DtoD"
    if act.startswith("kernel") or act == "memset":
        return "kernel"
    return None


def _measure_bias(device: int) -> dict:
    """{(before, kind): ms} the window of a near-empty operation of `kind`
    ("kernel", "HtoD", "DtoH", "DtoD": a device-to-device copy, as a decoder's
    output copy is) timed by the Timer on a stream, right after an operation
    of kind `before` ("idle": the stream had nothing queued). CUDA
    events bracket the op with the GPU's own latency (the launch or the
    engine switch after the start event, the flush before the end event):
    this is what a window holds beyond the op, minus a tiny op's true time
    (about a microsecond). The host's own time to launch, where the GPU
    waited for it (host_lag_ms), is measured per call and left out here as
    it is from every call's window."""
    s = _fastmog.Stream(device=device)
    big = _fastmog.GpuMat((8192, 8192, 3), np.uint8, device=device)
    tiny = _fastmog.GpuMat((1, 1, 3), np.uint8, device=device)
    host_in = _fastmog.pinned_empty((1, 16), np.uint8)
    host_out = _fastmog.pinned_empty((1, 16), np.uint8)
    small = _fastmog.GpuMat((1, 16), np.uint8, device=device)
    other = _fastmog.GpuMat((1, 16), np.uint8, device=device)
    # The operation before is a real transfer (4 MiB) or kernel: a 16-byte
    # copy does not occupy a copy engine the way a frame does, and the switch
    # from a busy engine is what a window holds (measured with CUPTI,
    # benchmarks/event_latency.py: after a 4K upload a kernel's window holds
    # about 7 us more than the kernel, after a 16-byte one about 4).
    block = _fastmog.GpuMat((1024, 4096), np.uint8, device=device)
    block_copy = _fastmog.GpuMat((1024, 4096), np.uint8, device=device)
    block_in = _fastmog.pinned_empty((1024, 4096), np.uint8)
    block_out = _fastmog.pinned_empty((1024, 4096), np.uint8)
    # the C base: its raw records are the uncorrected windows (index 11: GPU ms)
    t = _fastmog._Timer(nvtx=False)
    ops = {"kernel": lambda timer: tiny.fill((1, 2, 3), stream=s, timer=timer),
           "HtoD": lambda timer: small.upload(host_in, stream=s, timer=timer),
           "DtoH": lambda timer: small.download(host_out, stream=s, blocking=False,
                                                timer=timer),
           "DtoD": lambda timer: small.copy_to(other, stream=s, timer=timer)}
    befores = {"kernel": lambda: block.fill(7, stream=s),
               "HtoD": lambda: block.upload(block_in, stream=s),
               "DtoH": lambda: block.download(block_out, stream=s, blocking=False),
               "DtoD": lambda: block.copy_to(block_copy, stream=s)}
    out = {}
    gated = _fastmog.Stream(device=device)
    try:
        for kind, op in ops.items():
            for before in ("idle", *befores):
                windows = []
                for _ in range(31):     # its spread between processes was 3 us at 15
                    t.reset()
                    if before == "idle":
                        s.synchronize()
                    else:
                        big.fill((1, 2, 3), stream=s)     # keeps the stream busy meanwhile
                        befores[before]()
                    op(t)
                    s.synchronize()
                    raw = t._raw_records()[-1]
                    windows.append(raw[11] - host_lag_ms(raw[12] / 1e9, raw[23] / 1e9,
                                                         raw[8] / 1e9))
                out[(before, kind)] = sorted(windows)[len(windows) // 2]
        # a gated copy (Timer.gpu_copies), on a stream of its own: its window
        # opens once the host has submitted it, so nothing of the host's is
        # in it (gate.c)
        windows = []
        for _ in range(31):
            t.reset()
            gated.synchronize()
            t._gpu_copies("probe", "memcpy DtoD", gated, (1, 16, 1), [(small, other)])
            gated.synchronize()
            raw = t._raw_records()[-1]
            if raw[24]:
                windows.append(raw[11])
        if windows:
            out[("gate", "DtoD")] = sorted(windows)[len(windows) // 2]
    finally:
        gated.synchronize()
        gated.close()
        s.synchronize()
        for m in (big, tiny, small, other, block, block_copy):
            m.close()
        s.close()
    return out


def host_lag_ms(gpu_start, submitted, host_start=None):
    """How long the GPU had reached a call's start event before the host had
    submitted its work (both on the host's clock, seconds; None: unknown):
    on a stream with nothing queued the start event runs at once, and the
    window then holds the host's own time to launch (tens of us when other
    threads hold the driver's locks), which is no part of the work.
    The start event is recorded inside the call, so it ran no earlier than
    the call began (host_start): where the anchors' mapping puts it earlier
    (it drifts by tens of us), the lag is counted from the call's start, so
    it is never more than the host's own time to submit."""
    if gpu_start is None or submitted is None:
        return 0.0
    if host_start is not None:
        gpu_start = max(gpu_start, host_start)
    return max(0.0, (submitted - gpu_start) * 1e3)


def event_bias(device: int = 0) -> dict | None:
    """The measured latency of event timing per transition (see
    _measure_bias), once per process and device; None without a GPU."""
    return _once(_bias, device, _measure_bias, "fastmog event bias")


def corrected(records, bias_of=event_bias):
    """The records with each GPU window less the time the GPU waited for the
    host to submit the work (host_lag_ms) and the event latency measured for
    its transition (the previous op on its stream, or an idle stream); the
    raw time stays in gpu_ms_raw."""
    # each GPU record's predecessor on its stream, in GPU order (a nested
    # upload runs before the call that holds it)
    previous: dict[int, object] = {}
    by_stream: dict[int, list] = {}
    for r in records:
        if r.gpu_ms is not None and r.gpu_start is not None and r.activity != "wait":
            by_stream.setdefault(r.stream, []).append(r)
    for rs in by_stream.values():
        rs.sort(key=lambda r: r.gpu_start)
        for a, b in zip(rs, rs[1:]):
            previous[b.index] = a
    out = []
    for r in records:
        kind = _kind(r.activity)
        if r.gpu_ms is None or kind is None or r.device < 0:
            out.append(r)
            continue
        bias = bias_of(r.device)
        prev = previous.get(r.index)
        before = "gate" if r.gated else "idle"
        if prev is not None and r.gpu_start - prev.gpu_end < 3e-6:
            before = _kind(prev.activity) or "kernel"
        cut = bias.get((before, kind), 0.0) if bias else 0.0
        # behind a gate the GPU reached the window once the work was submitted
        lag = 0.0 if r.gated else min(host_lag_ms(r.gpu_start, r.submitted, r.host_start),
                                      r.gpu_ms)
        own = r.gpu_ms - lag
        ms = max(own - cut, 0.5 * own)
        # the work began once the host had submitted it
        out.append(dataclasses.replace(r, gpu_ms=ms, gpu_ms_raw=r.gpu_ms,
                                       gpu_start=r.gpu_start + lag / 1e3))
    return out
