"""The main job's checkpoints (issue 24, item 5): --checkpoint,
--checkpoint-every and --resume give the masks of the run that never
stopped, after a clean end and after an interruption; what does not fit is
one line before the run."""
import numpy as np
import pytest

import fastmog
from cli_helpers import one_error_line, run, run_in_process
from fastmog.app import _writers

cv2 = pytest.importorskip("cv2")

MOG2 = ["--history", "20", "--var-threshold", "12"]


@pytest.fixture(scope="module")
def frames_dir(tmp_path_factory):
    """40 colour frames of noise and a block that walks."""
    root = tmp_path_factory.mktemp("walk")
    rng = np.random.default_rng(5)
    for i in range(40):
        f = rng.integers(90, 110, (48, 64, 3), dtype=np.uint8)
        f[10:20, i:i + 10] = 240
        cv2.imwrite(str(root / f"frame_{i:04d}.png"), f)
    return root


@pytest.fixture(scope="module")
def whole(frames_dir, tmp_path_factory):
    """The masks of the run that never stopped."""
    out = tmp_path_factory.mktemp("whole") / "masks"
    r = run(frames_dir, "--cpu", *MOG2, "--out", out)
    assert r.returncode == 0, r.stderr
    return _masks(out)


def _masks(folder):
    return {p.name: cv2.imread(str(p), cv2.IMREAD_UNCHANGED)
            for p in sorted(folder.glob("mask_*.png"))}


def _same(got, want):
    assert list(got) == list(want)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def test_a_run_resumed_from_its_checkpoint_gives_the_uninterrupted_masks(frames_dir, whole,
                                                                         tmp_path):
    out, ck = tmp_path / "masks", tmp_path / "model.npz"
    r = run(frames_dir, "--cpu", *MOG2, "--frames", "17", "--checkpoint", ck,
            "--checkpoint-every", "5", "--out", out)
    assert r.returncode == 0, r.stderr
    assert "checkpoint: the model after 17 frames of the input" in r.stdout
    assert fastmog.load_snapshot(ck)["source_frames"] == 17
    r = run(frames_dir, "--cpu", "--resume", ck, "--checkpoint", ck, "--out", out)
    assert r.returncode == 0, r.stderr
    assert "its model has seen 17 frames, which are skipped" in r.stdout
    assert "processed 23 frames" in r.stdout
    assert fastmog.load_snapshot(ck)["source_frames"] == 40
    _same(_masks(out), whole)


def test_after_an_interruption_the_last_checkpoint_stands(frames_dir, whole, tmp_path,
                                                          monkeypatch, capsys):
    """Stopped after 13 masks: the checkpoint of frame 10 stands, and resuming
    from it (with --overwrite for the masks written after it) completes the
    uninterrupted run's masks exactly."""
    out, ck = tmp_path / "masks", tmp_path / "model.npz"
    write = _writers.PngSequence.write

    def stop_after_13(self, mask):
        if self.count == 13:
            raise KeyboardInterrupt
        write(self, mask)

    monkeypatch.setattr(_writers.PngSequence, "write", stop_after_13)
    r = run_in_process(capsys, frames_dir, "--cpu", *MOG2, "--checkpoint", ck,
                       "--checkpoint-every", "5", "--out", out)
    monkeypatch.undo()
    assert r.returncode == 130, r.stderr
    assert "the model after 10 frames of the input" in r.stdout
    assert "(the last one before the stop)" in r.stdout
    assert len(_masks(out)) == 13
    # masks 10-12 exist: refused without --overwrite, which deletes only those
    line = one_error_line(run_in_process(capsys, frames_dir, "--cpu", "--resume", ck,
                                         "--out", out))
    assert "is not empty (3 entries)" in line
    r = run(frames_dir, "--cpu", "--resume", ck, "--out", out, "--overwrite")
    assert r.returncode == 0, r.stderr
    _same(_masks(out), whole)


def test_a_snapshot_without_a_frame_count_is_not_a_checkpoint(frames_dir, tmp_path, capsys):
    sub = fastmog.cpu.BackgroundSubtractorMOG2()
    sub.apply(cv2.imread(str(next(frames_dir.glob("*.png")))))
    path = tmp_path / "model.npz"
    fastmog.save_snapshot(path, sub.snapshot())
    line = one_error_line(run_in_process(capsys, frames_dir, "--cpu", "--resume", path))
    assert "not a checkpoint of the main job" in line


@pytest.fixture(scope="module")
def checkpoint(frames_dir, tmp_path_factory):
    ck = tmp_path_factory.mktemp("ck") / "model.npz"
    r = run(frames_dir, "--cpu", *MOG2, "--frames", "6", "--checkpoint", ck)
    assert r.returncode == 0, r.stderr
    return ck


def test_mistakes_are_one_line_before_the_run(frames_dir, checkpoint, tmp_path, capsys):
    def error(*args):
        return one_error_line(run_in_process(capsys, *args))

    assert "no --checkpoint is given" in error(frames_dir, "--cpu", "--checkpoint-every", "5")
    assert "--history cannot be given with --resume" in error(
        frames_dir, "--cpu", "--resume", checkpoint, "--history", "30")
    assert "cannot continue a mask video" in error(
        frames_dir, "--cpu", "--resume", checkpoint, "--out", tmp_path / "m.mkv")
    assert "give --checkpoint-every too" in error(frames_dir, frames_dir, "--cpu",
                                                  "--checkpoint", tmp_path / "ck")
    assert "single source" in error(frames_dir, frames_dir, "--cpu", "--resume", checkpoint)
    a_file = tmp_path / "c.npz"
    a_file.write_bytes(b"x")
    assert "is a file; with several sources it is a folder" in error(
        frames_dir, frames_dir, "--cpu", "--checkpoint", a_file, "--checkpoint-every", "5")
    small = tmp_path / "small"
    small.mkdir()
    cv2.imwrite(str(small / "a.png"), np.zeros((20, 30), np.uint8))
    cv2.imwrite(str(small / "b.png"), np.zeros((20, 30), np.uint8))
    line = error(small, "--cpu", "--resume", checkpoint)
    assert "holds a model of 64x48 BGR frames; this input gives 30x20 BGR frames" in line
    damaged = tmp_path / "damaged.npz"
    damaged.write_bytes(checkpoint.read_bytes()[:500])
    assert "not a whole fastmog MOG2 snapshot file" in error(frames_dir, "--cpu", "--resume",
                                                             damaged)
    assert "cannot be used with --resume" in error(frames_dir, "--cpu", "--resume", checkpoint,
                                                   "--events", tmp_path / "e.jsonl")
    folder = tmp_path / "cks"
    folder.mkdir()
    (folder / f"{frames_dir.name}.npz").write_bytes(b"an earlier run's")
    other = tmp_path / "other"
    other.mkdir()
    cv2.imwrite(str(other / "a.png"), np.zeros((48, 64, 3), np.uint8))
    assert "holds checkpoints of an earlier run" in error(
        frames_dir, other, "--cpu", "--checkpoint", folder, "--checkpoint-every", "5")
    snap = fastmog.load_snapshot(checkpoint)
    snap["mode_count"][0, 0] = 9                        # more than its modes
    mixed = tmp_path / "mixed.npz"
    fastmog.save_snapshot(mixed, snap)
    assert "the checkpoint" in error(frames_dir, "--cpu", "--resume", mixed) and \
        "more than its 5 modes" in error(frames_dir, "--cpu", "--resume", mixed)
    exists = tmp_path / "exists.npz"
    exists.write_bytes(b"keep")
    assert "--checkpoint" in error(frames_dir, "--cpu", "--checkpoint", exists)
    assert exists.read_bytes() == b"keep"


def test_a_checkpoint_past_the_end_of_the_input(tmp_path, capsys):
    folder = tmp_path / "four"
    folder.mkdir()
    for i in range(4):
        cv2.imwrite(str(folder / f"f{i}.png"), np.full((16, 16, 3), i * 40, np.uint8))
    ck = tmp_path / "ck.npz"
    assert run(folder, "--cpu", "--checkpoint", ck).returncode == 0
    line = one_error_line(run_in_process(capsys, folder, "--cpu", "--resume", ck))
    assert "has seen 4 frames; this input has 4: nothing is left" in line


@pytest.mark.gpu
def test_gpu_pipeline_checkpoints_at_segment_ends(frames_dir, whole, tmp_path):
    """The overlapped pipeline runs ahead of its masks; with checkpoints it
    runs in segments, so each checkpoint is the model after exactly the
    frames whose masks were written (batch 4, segments of 6)."""
    out, ck = tmp_path / "masks", tmp_path / "model.npz"
    r = run(frames_dir, *MOG2, "--batch", "4", "--frames", "19", "--checkpoint", ck,
            "--checkpoint-every", "6", "--out", out)
    assert r.returncode == 0, r.stderr and "on GPU" in r.stdout
    r = run(frames_dir, "--batch", "4", "--resume", ck, "--out", out)
    assert r.returncode == 0, r.stderr
    _same(_masks(out), whole)
    r = run(frames_dir, "--cpu", "--resume", ck, "--out", out, "--overwrite")
    assert r.returncode == 0, r.stderr
    _same(_masks(out), whole)
