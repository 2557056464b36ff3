"""Helpers of the main job's tests: run `python -m fastmog` as a user does and
read its one-line errors."""
import hashlib
import subprocess
import sys

import numpy as np


def run(*args, timeout=300, cwd=None, env=None):
    """`python -m fastmog ARGS`; bytes arguments (file names that are not
    UTF-8) pass through unchanged."""
    argv = [a if isinstance(a, bytes) else str(a) for a in args]
    return subprocess.run([sys.executable, "-m", "fastmog", *argv], capture_output=True,
                          text=True, errors="backslashreplace", timeout=timeout, cwd=cwd,
                          env=env)


def one_error_line(result, status=2):
    """The single error line; stderr holds nothing but fastmog's own lines
    (no traceback, no OpenCV or FFmpeg noise)."""
    assert result.returncode == status, (result.returncode, result.stderr)
    lines = [l for l in result.stderr.splitlines() if l.startswith("fastmog: error:")]
    assert len(lines) == 1, result.stderr
    assert all(l.startswith("fastmog: ") for l in result.stderr.splitlines()), result.stderr
    return lines[0]


def write_cdnet(root, shape=(24, 32), n=4, first=1, truth_shape=None, roi_text="1 4"):
    """A tiny CDnet-layout sequence: input/inNNNNNN.png, groundtruth/gtNNNNNN.png
    (a moving square labelled 255), ROI.bmp and temporalROI.txt."""
    import cv2

    (root / "input").mkdir(parents=True)
    (root / "groundtruth").mkdir()
    truth_shape = truth_shape or shape
    rng = np.random.default_rng(7)
    for i in range(first, first + n):
        frame = rng.integers(90, 110, shape + (3,), dtype=np.uint8)
        frame[4:10, 2 * i:2 * i + 6] = 250
        assert cv2.imwrite(str(root / "input" / f"in{i:06d}.png"), frame)
        gt = np.zeros(truth_shape, np.uint8)
        gt[4:10, 2 * i:2 * i + 6] = 255
        assert cv2.imwrite(str(root / "groundtruth" / f"gt{i:06d}.png"), gt)
    assert cv2.imwrite(str(root / "ROI.bmp"), np.full(shape, 255, np.uint8))
    if roi_text is not None:
        (root / "temporalROI.txt").write_text(roi_text)
    return root


def write_gapped_mkv(path, numbers):
    """An FFV1 .mkv at 25 fps holding only the frames `numbers` of its timeline
    (a damaged file whose missing frames left a hole in the timestamps)."""
    import fractions

    import pytest

    av = pytest.importorskip("av")

    with av.open(str(path), "w") as out:
        stream = out.add_stream("ffv1", rate=25)
        stream.width, stream.height, stream.pix_fmt = 32, 24, "yuv420p"
        stream.time_base = fractions.Fraction(1, 25)
        for i in numbers:
            frame = av.VideoFrame.from_ndarray(np.full((24, 32, 3), i * 8, np.uint8),
                                               format="rgb24")
            frame.pts, frame.time_base = i, fractions.Fraction(1, 25)
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


def run_in_process(capsys, *args):
    """fastmog.app.cli.main(ARGS) in this process, for mistakes found before any
    frame is decoded (much faster than a new interpreter); the result looks
    like run()'s."""
    import os

    from fastmog.app import cli

    argv = [os.fsdecode(a) if isinstance(a, bytes) else str(a) for a in args]
    try:
        status = cli.main(argv)
    except SystemExit as e:
        status = e.code
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(argv, status, out, err)


def masks_digest(masks):
    """The SHA-256 of the masks' bytes, as SourceResult.digest counts them."""
    h = hashlib.sha256()
    for m in masks:
        h.update(np.ascontiguousarray(m).data)
    return h.hexdigest()
