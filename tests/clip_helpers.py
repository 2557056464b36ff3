"""What the video tests compare make_clips.py's clips by (the `clips`
fixture finds them): the per-frame SHA-256 of FFmpeg's planes in
clips.json, and device planes copied back."""
import hashlib
import json

import numpy as np

import fastmog


def manifest(clips):
    return json.loads((clips / "clips.json").read_text())


def sha256(array):
    return hashlib.sha256(np.ascontiguousarray(array)).hexdigest()


def device_array(plane, stream):
    """A decoded plane copied to the host, for comparison only. A chroma
    plane's (H/2, W/2, 2) pairs are read as (H/2, W) bytes: a GpuMat holds
    1, 3 or 4 channels."""
    cai = plane.__cuda_array_interface__
    h, w = cai["shape"][0], cai["shape"][1]
    c = cai["shape"][2] if len(cai["shape"]) == 3 else 1
    pitch = cai["strides"][0] if cai.get("strides") else w * c
    view = fastmog.DevicePointer(cai["data"][0], (h, w * c), pitch=pitch, owner=plane,
                                 stream=cai.get("stream"))
    return fastmog.asgpumat(view, stream=stream).download(stream=stream)
