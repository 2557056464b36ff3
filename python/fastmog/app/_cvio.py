"""OpenCV for the main job: imported on first use with its log noise turned
down, and image files read and written through bytes so any file name works.

OpenCV's Python binding crashes on a `str` path holding lone surrogates (how
Python spells a file name that is not UTF-8), so paths reach it as bytes and
image files go through numpy and cv2.imdecode / cv2.imencode.
"""
import os
import stat

import numpy as np

from ._errors import UserError, shown

# Both take effect only if set before cv2 loads; set here, they stay in this
# process. A user's own setting wins.
_QUIET = {"OPENCV_LOG_LEVEL": "ERROR", "OPENCV_FFMPEG_LOGLEVEL": "-8"}


def quiet_opencv():
    """Keeps OpenCV's and FFmpeg's warnings out of the user's terminal."""
    for name, value in _QUIET.items():
        os.environ.setdefault(name, value)


def cv2(why):
    """The cv2 module, or a UserError saying what to install."""
    quiet_opencv()
    try:
        import cv2 as module
    except ImportError:
        raise UserError(f"{why} needs OpenCV, which is not installed: "
                        f"pip install opencv-python-headless") from None
    return module


def read_image(path, flags, what="image"):
    """Decodes an image file; a UserError if it cannot be read or decoded."""
    cv = cv2(f"reading {what} files")
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            # a FIFO would block the read forever, a device never end
            raise UserError(f"cannot read {what} {shown(path)}: not a regular file")
        data = np.fromfile(path, np.uint8)
    except OSError as e:
        raise UserError(f"cannot read {what} {shown(path)}: {e.strerror or e}") from None
    try:
        image = cv.imdecode(data, flags) if data.size else None
    except cv.error as e:
        # e.g. a header claiming more pixels than OpenCV will decode
        why = ("too large to decode (more pixels than OpenCV's CV_IO_MAX_IMAGE_PIXELS)"
               if "MAX_IMAGE_PIXELS" in str(e)
               else f"OpenCV cannot decode it ({getattr(e, 'err', None) or 'cv2.error'})")
        raise UserError(f"cannot read {what} {shown(path)}: {why}") from None
    if image is None:
        raise UserError(f"cannot read {what} {shown(path)}: not an image OpenCV can decode")
    return image


def read_grey(path, what="ground truth"):
    return read_image(path, cv2("reading ground truth").IMREAD_GRAYSCALE, what)


def write_image(path, image, what="image"):
    """Encodes by the file's extension and writes; a UserError on failure."""
    cv = cv2(f"writing {what} files")
    suffix = os.path.splitext(os.fsdecode(path))[1]
    ok, data = cv.imencode(suffix, image)
    if not ok:
        raise UserError(f"cannot write {what} {shown(path)}: OpenCV cannot encode {suffix}")
    # written under a hidden name and renamed, so Ctrl-C or a full disk in
    # the middle never leaves a truncated file under the real name
    path = os.fsdecode(path)
    folder, name = os.path.split(path)
    partial = os.path.join(folder, f".{name}.partial")
    try:
        with open(partial, "wb") as f:
            f.write(data)
        os.replace(partial, path)
    except BaseException as e:
        try:
            os.unlink(partial)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise UserError(f"cannot write {what} {shown(path)}: {e.strerror or e}") from None
        raise
