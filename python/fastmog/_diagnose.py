"""fastmog.diagnose(): what CUDA sees on this machine, or why no GPU is usable."""
import sys

from . import _fastmog


def _version_text(encoded):
    if not encoded:
        return "none"
    return f"{encoded // 1000}.{encoded % 1000 // 10}"


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
    print(f"fastmog CUDA runtime {report['runtime_version']} (linked statically)", file=out)
    print(f"NVIDIA driver supports CUDA {report['driver_version']}", file=out)
    if status != "cudaSuccess":
        reason = {
            "cudaErrorInsufficientDriver": "no NVIDIA driver is loaded, or it is older than "
                                           "the runtime needs",
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
