"""The main job's motion step (issue 23, item 5): --zones, --morphology,
--min-area, --threshold, --events, --regions and the preview's boxes; its
events and regions are fastmog.cpu's, frame for frame, on the host
reference and on the GPU (where no mask leaves the GPU)."""
import json
import os
import pathlib

import numpy as np
import pytest

import fastmog
from cli_helpers import one_error_line, run, run_in_process

cv2 = pytest.importorskip("cv2")

MOG2 = ["--history", "20", "--var-threshold", "12"]


@pytest.fixture(scope="module")
def frames_dir(tmp_path_factory):
    """40 grey frames of noise, a block that crosses the left half from frame
    8 to 20, rests, and another that crosses the right half from 28 on."""
    root = tmp_path_factory.mktemp("walk")
    rng = np.random.default_rng(11)
    for i in range(40):
        frame = rng.integers(95, 105, (60, 96), dtype=np.uint8)
        if 8 <= i <= 20:
            frame[20:32, 2 * (i - 8):2 * (i - 8) + 10] = 230
        if i >= 28:
            frame[30:44, 50 + 3 * (i - 28):58 + 3 * (i - 28)] = 20
        cv2.imwrite(str(root / f"frame_{i:04d}.png"), frame)
    return root


def _host_motion(folder, zones=None, **options):
    """What fastmog.cpu gives for these frames, composed by hand."""
    sub = fastmog.cpu.BackgroundSubtractorMOG2(history=20, var_threshold=12.0)
    det = fastmog.cpu.MotionDetector(zones=zones, fps=25.0, **options)
    per_frame = []
    for path in sorted(folder.glob("frame_*.png")):
        frame = cv2.imread(str(path), cv2.IMREAD_COLOR)       # as the main job reads frames
        per_frame.append(det.update(sub.apply(frame)))
    det.finish()
    return per_frame, det.events


def _json_lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


ZONES = [{"name": "left", "polygon": [[0, 0], [47, 0], [47, 59], [0, 59]]},
         [[48, 10], [95, 10], [95, 59], [60, 59]]]


@pytest.mark.parametrize("where", ["host", pytest.param("gpu", marks=pytest.mark.gpu)])
def test_events_and_regions_are_the_host_detectors(frames_dir, tmp_path, where):
    zones_file = tmp_path / "zones.json"
    zones_file.write_text(json.dumps(ZONES))
    events, regions = tmp_path / "events.jsonl", tmp_path / "regions.jsonl"
    trace = tmp_path / "trace.json"
    device = ["--cpu"] if where == "host" else ["--trace", trace]
    r = run(frames_dir, *device, *MOG2, "--zones", zones_file, "--morphology", "open:3",
            "--min-area", "4", "--threshold", "0.01", "--events", events, "--regions", regions)
    assert r.returncode == 0, r.stderr
    assert f"on the {'GPU' if where == 'gpu' else 'host'})" in r.stdout
    if where == "gpu":
        # the motion step ran on the device masks, and no mask was downloaded
        calls = {e["name"] for e in json.loads(trace.read_text())["traceEvents"]
                 if e.get("cat") == "host"}
        assert "connected_components" in " ".join(calls), sorted(calls)
        assert "GpuMat.download" not in calls, sorted(calls)

    polygons = [ZONES[0]["polygon"], ZONES[1]]
    per_frame, expected = _host_motion(frames_dir, zones=polygons, morphology=("open", 3),
                                       min_area=4, threshold=0.01)
    assert expected, "the scene must hold events for this test to mean anything"
    names = ["left", "zone 1"]
    got = _json_lines(events)
    assert [(e["zone"], e["start_frame"], e["end_frame"], e["peak_frame"], e["box"])
            for e in got] == \
        [(names[e.zone], e.start_frame, e.end_frame, e.peak_frame,
          None if e.box is None else list(e.box)) for e in expected]
    assert {e["zone"] for e in got} == {"left", "zone 1"}
    lines = _json_lines(regions)
    assert len(lines) == len(per_frame) == 40
    for line, m in zip(lines, per_frame):
        assert line["frame"] == m.index and line["light_switch"] == m.light_switch
        for z_line, z in zip(line["zones"], m.zones):
            assert z_line["regions"] == z.regions.stats.tolist()
            assert z_line["motion"] == z.motion
            assert z_line["score"] == pytest.approx(z.score, abs=1e-6)
    # the summary lists them
    assert f"fastmog: motion: {len(expected)} event" in r.stdout
    assert sum(l.startswith("fastmog: event: ") for l in r.stdout.splitlines()) == \
        len(expected)


def test_defaults_are_the_detectors_and_none_turns_morphology_off(frames_dir, tmp_path):
    events = tmp_path / "events.jsonl"
    r = run(frames_dir, "--cpu", *MOG2, "--events", events)
    assert r.returncode == 0, r.stderr
    _, expected = _host_motion(frames_dir)
    assert [(e["start_frame"], e["end_frame"]) for e in _json_lines(events)] == \
        [(e.start_frame, e.end_frame) for e in expected]
    assert "open 3x3 rect" in r.stdout
    r = run(frames_dir, "--cpu", *MOG2, "--events", events, "--overwrite",
            "--morphology", "none")
    assert r.returncode == 0, r.stderr
    _, expected = _host_motion(frames_dir, morphology=None)
    assert [(e["start_frame"], e["end_frame"]) for e in _json_lines(events)] == \
        [(e.start_frame, e.end_frame) for e in expected]
    assert "no morphology" in r.stdout


def test_preview_draws_the_zones_and_the_boxes(frames_dir, tmp_path):
    zones_file = tmp_path / "zones.json"
    zones_file.write_text(json.dumps(ZONES))
    preview = tmp_path / "preview.png"
    r = run(frames_dir, "--cpu", *MOG2, "--zones", zones_file, "--preview", preview)
    assert r.returncode == 0, r.stderr
    img = cv2.imread(str(preview))
    frame_panel = img[:, :96]
    yellow = np.all(frame_panel == (0, 255, 255), axis=2)
    red = np.all(frame_panel == (0, 0, 255), axis=2)
    assert yellow[0, 0] and yellow[10, 60]          # the zones' corners
    per_frame, _ = _host_motion(frames_dir, zones=[ZONES[0]["polygon"], ZONES[1]])
    boxes = [b for z in per_frame[-1].zones for b in z.regions.boxes.tolist()]
    assert boxes
    x, y, w, h = boxes[0]
    assert red[y, x] and red[y + h - 1, x + w - 1]
    # without motion options the preview's frame is the frame itself
    plain = tmp_path / "plain.png"
    assert run(frames_dir, "--cpu", *MOG2, "--preview", plain).returncode == 0
    assert not np.all(cv2.imread(str(plain))[:, :96] == (0, 255, 255), axis=2).any()


@pytest.mark.parametrize("content, says", [
    ("{not json", "is not JSON"),
    ("[[[0, 0], [1" + "0" * 5000 + ", 0], [5, 5]]]", "is not JSON"),    # too long for int()
    ("[]", "must hold a non-empty list of zones"),
    ("[[[0, 0], [5, 5]]]", "a polygon needs at least 3 points, got 2"),
    ('[[[0, 0], [5, "a"], [3, 3]]]', "a polygon is a list of [x, y] integer points"),
    ('[{"polygon": [[0, 0], [5, 0], [5, 5]], "colour": 1}]', "unknown keys: colour"),
    ('[{"name": "a", "polygon": [[0, 0], [5, 0], [5, 5]]}, '
     '{"name": "a", "polygon": [[0, 0], [5, 0], [5, 5]]}]', "names two zones alike"),
    ("[[[0, 0], [500, 0], [5, 5]]]", "point (500, 0) lies outside the 96x60 frame"),
])
def test_bad_zone_files_are_one_line_before_the_run(frames_dir, tmp_path, capsys, content,
                                                    says):
    zones_file = tmp_path / "zones.json"
    zones_file.write_text(content)
    events = tmp_path / "events.jsonl"
    line = one_error_line(run_in_process(capsys, frames_dir, "--cpu", "--zones", zones_file,
                                         "--events", events))
    assert says in line and str(zones_file) in line, line
    assert not events.exists()                      # nothing was started


@pytest.mark.parametrize("option, says", [
    (["--morphology", "blur:3"], "op must be one of"),
    (["--morphology", "open:33"], "from 1 to 31"),
    (["--morphology", "open"], "expected OP:SIZE"),
    (["--morphology", "open:3:star"], "shape must be one of"),
    (["--threshold", "1.5"], "expected a fraction from 0 to 1"),
    (["--min-area", "-1"], "at least 0"),
])
def test_bad_motion_options_are_one_line(frames_dir, capsys, option, says):
    line = one_error_line(run_in_process(capsys, frames_dir, "--cpu", *option))
    assert says in line, line


@pytest.fixture(scope="module")
def mirrored_dir(frames_dir, tmp_path_factory):
    """frames_dir's frames mirrored left to right: another camera's motion."""
    root = tmp_path_factory.mktemp("mirror")
    for path in sorted(frames_dir.glob("frame_*.png")):
        cv2.imwrite(str(root / path.name), cv2.imread(str(path), cv2.IMREAD_UNCHANGED)[:, ::-1])
    return root


@pytest.mark.parametrize("where", ["host", pytest.param("gpu", marks=pytest.mark.gpu)])
def test_several_sources_each_have_their_own_motion_step(frames_dir, mirrored_dir, tmp_path,
                                                         where):
    """--workers with motion options: every source's events and regions, in
    its own NAME.jsonl, equal fastmog.cpu's for that source alone; a source
    whose frame the zones do not fit fails alone, with the zones' line."""
    pytest.importorskip("distributed", reason="needs dask[distributed]")
    small = tmp_path / "small"
    small.mkdir()
    for path in sorted(frames_dir.glob("frame_*.png"))[:5]:
        cv2.imwrite(str(small / path.name), cv2.imread(str(path))[:30, :48])
    zones_file = tmp_path / "zones.json"
    zones_file.write_text(json.dumps(ZONES))
    events, regions = tmp_path / "events", tmp_path / "regions"
    device = ["--cpu"] if where == "host" else []
    r = run(frames_dir, mirrored_dir, small, "--workers", "2", *device, *MOG2,
            "--zones", zones_file, "--min-area", "4", "--threshold", "0.01",
            "--events", events, "--regions", regions, timeout=180)
    assert r.returncode == 4, (r.stdout, r.stderr)          # one source failed
    assert "processed 2 of 3 sources" in r.stdout
    assert f"fastmog: error: {small}: the zones file {zones_file}, left: point (47, 59) lies " \
           f"outside the 48x30 frame" in r.stderr.splitlines()
    polygons = [ZONES[0]["polygon"], ZONES[1]]
    names = ["left", "zone 1"]
    for folder in (frames_dir, mirrored_dir):
        per_frame, expected = _host_motion(folder, zones=polygons, min_area=4,
                                           threshold=0.01)
        assert expected, "each scene must hold events for this test to mean anything"
        got = _json_lines(events / f"{folder.name}.jsonl")
        assert [(e["zone"], e["start_frame"], e["end_frame"], e["box"]) for e in got] == \
            [(names[e.zone], e.start_frame, e.end_frame,
              None if e.box is None else list(e.box)) for e in expected]
        lines = _json_lines(regions / f"{folder.name}.jsonl")
        assert [[z["regions"] for z in line["zones"]] for line in lines] == \
            [[z.regions.stats.tolist() for z in m.zones] for m in per_frame]
        on = "GPU" if where == "gpu" else "host"
        assert f"fastmog: {folder}: motion: {len(expected)} event" in r.stdout
        assert f"on the {on})" in r.stdout
        assert sum(l.startswith(f"fastmog: {folder}: event: ")
                   for l in r.stdout.splitlines()) == len(expected)
    # the two cameras saw different motion: the files are each their own
    assert (events / f"{frames_dir.name}.jsonl").read_text() != \
        (events / f"{mirrored_dir.name}.jsonl").read_text()


@pytest.mark.parametrize("where", ["host", pytest.param("gpu", marks=pytest.mark.gpu)])
def test_a_damaged_video_among_several_keeps_the_others_motion(frames_dir, tmp_path, where):
    """A video with a hole among several sources with motion options: its
    line names the missing frames and the status is 3, while the healthy
    source's events and regions are still fastmog.cpu's; with
    --accept-short the damaged one's regions hold a line per frame read."""
    pytest.importorskip("distributed", reason="needs dask[distributed]")
    from cli_helpers import write_gapped_mkv

    video = write_gapped_mkv(tmp_path / "hole.mkv", [*range(6), *range(20, 24)])
    device = ["--cpu"] if where == "host" else []
    per_frame, expected = _host_motion(frames_dir, min_area=4, threshold=0.01)
    assert expected, "the healthy scene must hold events for this test to mean anything"
    for extra, status in (([], 3), (["--accept-short"], 0)):
        events, regions = tmp_path / f"events{status}", tmp_path / f"regions{status}"
        r = run(frames_dir, video, "--workers", "2", *device, *MOG2, "--min-area", "4",
                "--threshold", "0.01", "--events", events, "--regions", regions, *extra,
                timeout=180)
        assert r.returncode == status, (r.stdout, r.stderr)
        assert "processed 2 of 2 sources" in r.stdout
        said = r.stderr if status else r.stdout
        assert "frames 6-19 are missing" in said, (r.stdout, r.stderr)
        got = _json_lines(events / f"{frames_dir.name}.jsonl")
        assert [(e["start_frame"], e["end_frame"], e["box"]) for e in got] == \
            [(e.start_frame, e.end_frame, None if e.box is None else list(e.box))
             for e in expected]
        lines = _json_lines(regions / f"{frames_dir.name}.jsonl")
        assert [line["zones"][0]["regions"] for line in lines] == \
            [m.zones[0].regions.stats.tolist() for m in per_frame]
    assert len(_json_lines(regions / "hole.jsonl")) == 10


@pytest.mark.parametrize("extra, says", [
    (["--events", "{tmp}/e.jsonl"], "is a folder (a name without extension"),
    (["--events", "{tmp}/both", "--regions", "{tmp}/both"], "name the same file"),
    (["--events", "{tmp}/e", "--checkpoint", "{tmp}/c", "--checkpoint-every", "5"],
     "cannot be used with --checkpoint"),
    (["--zones", "{tmp}/zones.json"], "must hold a non-empty list of zones"),
])
def test_motion_mistakes_with_several_sources_are_one_line(frames_dir, mirrored_dir, tmp_path,
                                                           capsys, extra, says):
    (tmp_path / "zones.json").write_text("[]")
    args = [a.format(tmp=tmp_path) for a in extra]
    line = one_error_line(run_in_process(capsys, frames_dir, mirrored_dir, "--cpu", *args))
    assert says in line, line
    assert not (tmp_path / "c").exists()


def test_an_events_file_of_an_earlier_run_of_several_needs_overwrite(frames_dir, mirrored_dir,
                                                                     tmp_path, capsys):
    events = tmp_path / "events"
    events.mkdir()
    (events / f"{mirrored_dir.name}.jsonl").write_text("keep me\n")
    line = one_error_line(run_in_process(capsys, frames_dir, mirrored_dir, "--cpu",
                                         "--events", events))
    assert "--events" in line and "--overwrite" in line
    assert (events / f"{mirrored_dir.name}.jsonl").read_text() == "keep me\n"


def test_an_existing_events_file_needs_overwrite(frames_dir, tmp_path, capsys):
    events = tmp_path / "events.jsonl"
    events.write_text("keep me\n")
    line = one_error_line(run_in_process(capsys, frames_dir, "--cpu", "--events", events))
    assert "--events" in line and "--overwrite" in line
    assert events.read_text() == "keep me\n"


@pytest.mark.parametrize("where", ["host", pytest.param("gpu", marks=pytest.mark.gpu)])
def test_vtest_events_equal_the_host_detectors(data_dir, tmp_path, where):
    """The issue's own case: --events on vtest.avi (its first 150 frames, as
    OpenCV decodes them) equals fastmog.cpu's events, whichever device runs
    the job."""
    video = data_dir / "opencv_samples_video" / "vtest.avi"
    events = tmp_path / "events.jsonl"
    device = ["--cpu"] if where == "host" else ["--decode", "cpu"]
    r = run(video, *device, "--frames", "150", "--min-area", "30", "--events", events)
    assert r.returncode == 0, r.stderr
    cap = cv2.VideoCapture(str(video))
    sub = fastmog.cpu.BackgroundSubtractorMOG2()
    det = fastmog.cpu.MotionDetector(min_area=30, fps=cap.get(cv2.CAP_PROP_FPS))
    for _ in range(150):
        ok, frame = cap.read()
        assert ok
        det.update(sub.apply(frame))
    det.finish()
    assert det.events
    assert [(e["start_frame"], e["end_frame"], e["box"]) for e in _json_lines(events)] == \
        [(e.start_frame, e.end_frame, list(e.box)) for e in det.events]


@pytest.mark.gpu
def test_nvdec_frames_keep_their_masks_on_the_gpu(tmp_path):
    """NVDEC frames, MOG2 and the motion step all on the GPU: without --out
    no mask is downloaded, and the events equal fastmog.cpu's on the masks
    the same run writes with --out."""
    pytest.importorskip("PyNvVideoCodec", exc_type=ImportError)
    clips = pathlib.Path(os.environ.get("FASTMOG_CLIPS",
                                        pathlib.Path(__file__).parents[2] / ".testdata" / "clips"))
    video = clips / "vtest_h264.mkv"
    if not video.is_file():
        pytest.skip(f"no test clip {video}: run python benchmarks/make_clips.py")
    common = ["--decode", "nvdec", "--frames", "120", "--min-area", "30"]
    kept, masks = tmp_path / "kept.jsonl", tmp_path / "masks"
    r = run(video, *common, "--out", masks, "--events", kept)
    assert r.returncode == 0, r.stderr
    assert "on the GPU)" in r.stdout
    fps = cv2.VideoCapture(str(video)).get(cv2.CAP_PROP_FPS)
    det = fastmog.cpu.MotionDetector(min_area=30, fps=fps)
    written = sorted(masks.glob("mask_*.png"))
    assert len(written) == 120
    for path in written:
        det.update(cv2.imread(str(path), cv2.IMREAD_GRAYSCALE))
    det.finish()
    assert det.events
    expected = [(e.start_frame, e.end_frame, list(e.box)) for e in det.events]
    assert [(e["start_frame"], e["end_frame"], e["box"]) for e in _json_lines(kept)] == expected

    events, trace = tmp_path / "events.jsonl", tmp_path / "trace.json"
    r = run(video, *common, "--events", events, "--trace", trace)
    assert r.returncode == 0, r.stderr
    assert [(e["start_frame"], e["end_frame"], e["box"]) for e in _json_lines(events)] == expected
    calls = {e["name"] for e in json.loads(trace.read_text())["traceEvents"]
             if e.get("cat") == "host"}
    assert "GpuMat.download" not in calls, sorted(calls)
