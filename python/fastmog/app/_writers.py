"""The main job's outputs: masks as a PNG sequence or a lossless video, the
preview strip, and the checks that make them fail before the run, not after.

Mask videos are FFV1 (lossless) in .mkv or .avi, so the file holds exactly the
values 0, 127 and 255 that were computed; after writing, the video is read
back and compared frame by frame. Lossy containers (.mp4, .mov) are refused.
"""
import hashlib
import os
import pathlib
import re
import tempfile

import numpy as np

from . import _cvio
from ._errors import UserError, shown

LOSSLESS_VIDEO = {".mkv", ".avi"}
LOSSY_VIDEO = {".mp4", ".mov", ".m4v", ".webm", ".wmv", ".mpg", ".mpeg", ".flv"}
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp", ".ppm", ".pgm"}
MASK_NAME = re.compile(r"mask_\d{6}\.png")
DEFAULT_FPS = 25.0


def check_writable_file(path, what):
    """Refuses a path that cannot be written, by trying: an existing file is
    opened for appending (not changed), a new one is created and removed."""
    path = pathlib.Path(path)
    if path.is_dir():
        raise UserError(f"cannot write {what} {shown(path)}: it is a folder")
    if path.exists() and not path.is_file():
        raise UserError(f"cannot write {what} {shown(path)}: not a regular file")
    existed = path.exists()
    try:
        with open(path, "ab"):
            pass
    except OSError as e:
        raise UserError(f"cannot write {what} {shown(path)}: {e.strerror or e}") from None
    if not existed:
        path.unlink()


def mask_writer(out, overwrite, first=0):
    """The writer for --out (None: masks are not kept), checked now. first:
    the number of the first mask (a resumed run's), for a folder."""
    if out is None:
        return NoMasks()
    suffix = out.suffix.lower()
    if suffix in LOSSLESS_VIDEO:
        return LosslessVideo(out, overwrite)
    if suffix in LOSSY_VIDEO:
        raise UserError(f"cannot write masks to {shown(out)}: {suffix} video would not keep "
                        f"the mask values exactly; use .mkv or .avi (lossless FFV1) or a folder")
    if suffix in IMAGE_SUFFIXES:
        raise UserError(f"--out {shown(out)} names one image; give a folder for the PNG "
                        f"sequence or a .mkv/.avi file for a video")
    check_folder_name(out)
    return PngSequence(out, overwrite, first)


def check_folder_name(out):
    """A new --out folder has no extension: masks.gif would otherwise become a
    folder where a file was meant (an existing folder is taken as it is)."""
    suffix = pathlib.Path(out).suffix
    if suffix and not os.path.isdir(out):
        raise UserError(f"--out {shown(out)}: fastmog writes no {suffix.lower()} files; give a "
                        f"folder (a name without extension, or one that exists) for PNG "
                        f"masks, or a .mkv/.avi file for a lossless video")


class NoMasks:
    count = 0
    path = None

    def start(self, fps):
        pass

    def write(self, mask):
        pass

    def close(self):
        pass

    def verify(self):
        pass


class PngSequence:
    """mask_000000.png, mask_000001.png, ... in a folder that was empty, or
    (with --overwrite) whose old mask_NNNNNN.png files are deleted first;
    no other file in it is touched. A resumed run (first > 0) numbers on
    from `first` and keeps the earlier run's masks below it."""

    def __init__(self, out, overwrite, first=0):
        self.path, self.overwrite, self.count = pathlib.Path(out), overwrite, 0
        self.first = first
        if self.path.exists() and not self.path.is_dir():
            raise UserError(f"cannot write masks to {shown(out)}: it is a file, not a folder")
        if self.path.is_dir():
            entries = [e for e in os.listdir(self.path) if not self._earlier(e)]
            if entries and not overwrite:
                raise UserError(f"--out {shown(out)} is not empty ({len(entries)} entries): "
                                f"choose an empty folder, or pass --overwrite to replace the "
                                f"mask_NNNNNN.png files in it")
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UserError(f"cannot write masks to {shown(out)}: {e.strerror or e}") from None
        check_writable_file(self.path / ".fastmog-write-test", "masks to")

    def start(self, fps):
        if self.overwrite:
            # only names this writer produces, so stale masks of a longer
            # earlier run cannot mix with the new ones; user files stay
            for name in os.listdir(self.path):
                if (MASK_NAME.fullmatch(name) and not self._earlier(name)
                        and (self.path / name).is_file()):
                    (self.path / name).unlink()

    def _earlier(self, name):
        """A mask of the run this one resumes (numbered below `first`)."""
        return bool(self.first) and MASK_NAME.fullmatch(name) is not None and \
            int(name[5:-4]) < self.first

    def write(self, mask):
        _cvio.write_image(self.path / f"mask_{self.first + self.count:06d}.png", mask, "mask")
        self.count += 1

    def close(self):
        pass

    def verify(self):
        pass


def _digest(plane):
    return hashlib.blake2b(np.ascontiguousarray(plane).data, digest_size=16).digest()


class LosslessVideo:
    """FFV1 video of the masks at the source's frame rate, opened at the first
    mask (its size is known then) and read back by verify()."""

    FOURCC = "FFV1"

    def __init__(self, out, overwrite):
        self.path, self.count = pathlib.Path(out), 0
        self.cv2 = _cvio.cv2("writing a mask video")
        self.video, self.fps, self.digests = None, DEFAULT_FPS, []
        self.size = 0                          # the file's size when it last grew
        if self.path.exists() and not overwrite and not self.path.is_dir():
            raise UserError(f"--out {shown(out)} exists: pass --overwrite to replace it")
        check_writable_file(self.path, "the mask video")
        self._probe()

    def _probe(self):
        """Refuses now, not after the run, if this OpenCV cannot write and read
        back FFV1 exactly in this container."""
        sample = np.zeros((16, 16), np.uint8)
        sample[4:8] = 127
        sample[8:] = 255
        with tempfile.TemporaryDirectory(prefix="fastmog-") as tmp:
            probe = os.path.join(tmp, "probe" + self.path.suffix.lower())
            written = self._open(probe, 16, 16, 25.0)
            ok = written is not None
            if ok:
                for _ in range(2):
                    written.write(sample)
                written.release()
                frames = list(_read_back(self.cv2, probe))
                ok = len(frames) == 2 and all(
                    f.ndim == 3 and all((f[..., c] == sample).all() for c in range(f.shape[2]))
                    for f in frames)
        if not ok:
            raise UserError(f"this OpenCV cannot write lossless FFV1 video ({self.path.suffix}): "
                            f"write the masks to a folder (PNG sequence) instead")

    def _open(self, path, width, height, fps):
        fourcc = self.cv2.VideoWriter_fourcc(*self.FOURCC)
        video = self.cv2.VideoWriter(os.fsencode(path), fourcc, fps, (width, height), False)
        return video if video.isOpened() else None

    def start(self, fps):
        self.fps = fps

    def write(self, mask):
        if self.video is None:
            self.video = self._open(self.path, mask.shape[1], mask.shape[0], self.fps)
            if self.video is None:
                raise UserError(f"cannot write the mask video {shown(self.path)}")
        self.video.write(np.ascontiguousarray(mask))
        self.digests.append(_digest(mask))
        self.count += 1
        self._check_space(mask.nbytes)

    def _check_space(self, nbytes):
        """OpenCV's writer reports no failed write: a full disk shows as a file
        that stops growing. While it grows all is well; when it has not grown
        since the last mask (FFmpeg buffers, and masks compress well) and the
        disk has less room than a raw mask, the run stops here, not after."""
        try:
            size = _file_size(self.path)
        except OSError as e:
            raise UserError(f"cannot write the mask video {shown(self.path)}: "
                            f"{e.strerror or e}") from None
        if size > self.size:
            self.size = size
            return
        free = _free_bytes(self.path.parent)
        if free is not None and free < max(nbytes, 1 << 20):
            raise UserError(f"cannot write the mask video {shown(self.path)}: no space left "
                            f"on device (ENOSPC) after {self.count} masks")

    def close(self):
        if self.video is not None:
            self.video.release()
            self.video = None

    def verify(self):
        """Reads the video back: the same number of frames, each equal to the
        mask written (every channel), or a UserError."""
        if not self.digests:
            return
        n = 0
        for n, frame in enumerate(_read_back(self.cv2, self.path), 1):
            planes = [frame] if frame.ndim == 2 else [frame[..., c] for c in range(frame.shape[2])]
            if n > len(self.digests) or any(_digest(p) != self.digests[n - 1] for p in planes):
                raise UserError(f"the mask video {shown(self.path)} does not read back as "
                                f"written (frame {n - 1} differs)")
        if n != len(self.digests):
            free = _free_bytes(self.path.parent)
            full = ": no space left on device (ENOSPC)" if free is not None and free < 1 << 20 \
                else ""
            raise UserError(f"the mask video {shown(self.path)} reads back {n} of the "
                            f"{len(self.digests)} masks written{full}")


def _file_size(path):
    return os.stat(path).st_size


def _free_bytes(folder):
    """Bytes an unprivileged writer may still use in `folder`, or None."""
    try:
        st = os.statvfs(folder)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def _read_back(cv2, path):
    cap = cv2.VideoCapture(os.fsencode(path))
    try:
        while True:
            ok, frame = cap.read()
            if not ok:
                return
            yield frame
    finally:
        cap.release()


def check_preview(path):
    """Refuses an extension no image writer knows, or an unwritable path."""
    cv2 = _cvio.cv2("writing the preview")
    suffix = pathlib.Path(path).suffix.lower()
    if not suffix or not cv2.haveImageWriter("preview" + suffix):
        raise UserError(f"--preview {shown(path)}: no image writer for "
                        f"{suffix or 'a name without extension'}; use .png or .jpg")
    check_writable_file(path, "the preview")


PREVIEW_PANEL_WIDTH = 1280      # a preview panel's width at most, unless full size is asked


def write_preview(path, frame, mask, background, full_size=False, outlines=(), boxes=()):
    """frame | mask | background side by side, as one colour image; each panel
    scaled down to PREVIEW_PANEL_WIDTH wide unless full_size (a 4K preview
    would be 11520 pixels wide). The mask is scaled by nearest neighbour, so
    it keeps only its own values. On the frame, the motion step's zones
    (`outlines`, polygons of (x, y) points) are drawn in yellow and its
    regions (`boxes`, (x, y, w, h)) in red, at the frame's own size."""
    cv2 = _cvio.cv2("writing the preview")
    if len(outlines) or len(boxes):
        frame = _drawn(cv2, frame, outlines, boxes)

    def bgr(img, interpolation):
        if img.ndim == 3 and img.shape[2] == 1:        # NVDEC's luma plane is H x W x 1
            img = img[..., 0]
        h, w = img.shape[:2]
        if not full_size and w > PREVIEW_PANEL_WIDTH:
            size = (PREVIEW_PANEL_WIDTH, max(1, round(h * PREVIEW_PANEL_WIDTH / w)))
            img = cv2.resize(np.ascontiguousarray(img), size, interpolation=interpolation)
        return cv2.cvtColor(img, cv2.COLOR_GRAY2BGR) if img.ndim == 2 else img[..., :3]

    panels = [bgr(frame, cv2.INTER_AREA), bgr(mask, cv2.INTER_NEAREST),
              bgr(background, cv2.INTER_AREA)]
    _cvio.write_image(path, np.concatenate(panels, axis=1), "the preview")


def _drawn(cv2, frame, outlines, boxes):
    """A colour copy of the frame with the zones and boxes drawn, lines
    about 1/640 of its width thick (so they survive the panel's scaling)."""
    if frame.ndim == 3 and frame.shape[2] == 1:
        frame = frame[..., 0]
    img = (cv2.cvtColor(frame, cv2.COLOR_GRAY2BGR) if frame.ndim == 2
           else np.ascontiguousarray(frame[..., :3]))
    thick = max(1, round(img.shape[1] / 640))
    for points in outlines:
        cv2.polylines(img, [np.asarray(points, np.int32)], True, (0, 255, 255), thick)
    for x, y, w, h in boxes:
        cv2.rectangle(img, (int(x), int(y)), (int(x + w - 1), int(y + h - 1)), (0, 0, 255),
                      thick)
    return img
