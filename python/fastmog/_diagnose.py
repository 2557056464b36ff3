"""fastmog.diagnose(): what CUDA sees on this machine, or why no GPU is usable."""
import sys

from . import _fastmog

# Per CUDA major of the runtime linked in: the oldest Linux driver that runs
# it (with CUDA's minor-version compatibility a major's first driver runs
# every runtime of that major) and the distribution built with it.
BUILDS = {12: ("525.60.13", "fastmog-cu12"), 13: ("580.65.06", "fastmog-cu13")}


def _version_text(encoded):
    if not encoded:
        return "none"
    return f"{encoded // 1000}.{encoded % 1000 // 10}"


def driver_advice(runtime, driver):
    """What to do when the driver (CUDA version it supports, encoded as
    cudaDriverGetVersion gives it; 0 for none) cannot run this build's
    runtime; "" when it can."""
    major = runtime // 1000
    if driver >= runtime - runtime % 1000 or major not in BUILDS:
        return ""
    needs, _ = BUILDS[major]
    advice = (f"this fastmog is built with CUDA {_version_text(runtime)} and needs an NVIDIA "
              f"driver {needs} or newer")
    if not driver:
        return advice + "; no NVIDIA driver is loaded"
    advice += f"; this driver supports CUDA {_version_text(driver)} only"
    older = [m for m in BUILDS if m * 1000 <= driver]
    if older:
        fits = BUILDS[max(older)][1]
        advice += f": update the driver, or pip install {fits}, built for it"
    else:
        advice += ": update the driver"
    return advice


def diagnose(file=None):
    """Prints the CUDA runtime and driver versions and every usable device
    (name, compute capability, memory), or says plainly why no GPU is usable.
    Returns the same facts as a dict."""
    out = sys.stdout if file is None else file
    runtime, driver = _fastmog._versions()
    status, text = _fastmog._cuda_status()
    report = {
        "runtime_version": _version_text(runtime),
        "driver_version": _version_text(driver),
        "status": status,
        "devices": [],
    }
    needs = BUILDS.get(runtime // 1000, ("", ""))[0]
    report["driver_needed"] = needs
    print(f"fastmog CUDA runtime {report['runtime_version']} (linked statically"
          + (f"; needs an NVIDIA driver {needs} or newer)" if needs else ")"), file=out)
    print(f"NVIDIA driver supports CUDA {report['driver_version']}", file=out)
    if status != "cudaSuccess":
        reason = {
            "cudaErrorInsufficientDriver": driver_advice(runtime, driver)
            or "no NVIDIA driver is loaded, or it is older than the runtime needs",
            "cudaErrorNoDevice": "the driver sees no CUDA GPU",
        }.get(status, text)
        report["reason"] = reason
        print(f"No usable GPU: {reason} ({status}).", file=out)
        return report
    for device in range(_fastmog.device_count()):
        props = _fastmog.device_properties(device)
        free, total = _fastmog.mem_get_info(device)
        props["free_memory"] = free
        report["devices"].append(props)
        major, minor = props["compute_capability"]
        print(f"device {device}: {props['name']}, compute capability {major}.{minor}, "
              f"{total / 2**30:.1f} GiB ({free / 2**30:.1f} GiB free), "
              f"{props['multiprocessors']} SMs, PCI {props['pci_bus_id']}", file=out)
    return report
