"""The host side of benchmarks/run.py's issue-13 floor: cpu._state() and the
modes-visited count, on models whose modes are known by construction."""
import importlib.util
import pathlib

import numpy as np
import pytest

import fastmog

RUN_PY = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "run.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_run", RUN_PY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def model_of(values, shape=(2, 3)):
    """A host model fed constant frames of `values` at a fixed rate of 0.1, so
    each new value becomes one more mode (the first frame gets weight 1)."""
    sub = fastmog.cpu.BackgroundSubtractorMOG2()
    for v in values:
        sub.apply(np.full(shape, v, np.uint8), 0.1)
    return sub


def test_state_before_any_frame_is_refused():
    with pytest.raises(ValueError):
        fastmog.cpu.BackgroundSubtractorMOG2()._state()


def test_state_is_a_copy_of_the_model():
    frame = np.random.default_rng(3).integers(0, 256, (4, 5, 3), dtype=np.uint8)
    sub = fastmog.cpu.BackgroundSubtractorMOG2(n_mixtures=4)
    sub.apply(frame)
    state = sub._state()
    assert state["weight"].shape == state["variance"].shape == (4, 4, 5)
    assert state["mean"].shape == (4, 3, 4, 5) and state["mean"].dtype == np.float32
    assert state["mode_count"].dtype == np.uint8
    np.testing.assert_array_equal(state["mode_count"], sub.mode_counts())
    # one frame: one mode per pixel, weight 1, mean the frame, variance var_init
    assert (state["mode_count"] == 1).all() and (state["weight"][0] == 1).all()
    np.testing.assert_array_equal(state["mean"][0], np.moveaxis(frame, -1, 0).astype(np.float32))
    assert (state["variance"][0] == np.float32(sub.var_init)).all()
    state["mode_count"][...] = 0  # a copy: the model keeps its counts
    assert (sub.mode_counts() == 1).all()


def test_visited_counts_modes_up_to_the_first_fit(bench):
    sub = model_of([100, 200, 50])
    state = sub._state()
    assert (state["mode_count"] == 3).all()
    means = [float(state["mean"][m, 0, 0, 0]) for m in range(3)]
    assert means[0] == 100 and sorted(means) == [50, 100, 200]
    # var_init 15, threshold 9 * 15 = 135: 11^2 fits, 12^2 does not
    frame = np.array([[100, 111, 112], [50, 200, 150]], np.uint8)
    expected = [[1, 1, 3], [1 + means.index(50), 1 + means.index(200), 3]]
    np.testing.assert_array_equal(bench.visited_modes(state, frame, sub.var_threshold_gen),
                                  expected)


def test_visited_sums_the_distance_over_channels(bench):
    sub = fastmog.cpu.BackgroundSubtractorMOG2()
    for v in (100, 200):
        sub.apply(np.full((1, 2, 3), v, np.uint8), 0.1)
    state = sub._state()
    assert (state["mode_count"] == 2).all() and state["mean"][0, :, 0, 0].tolist() == [100] * 3
    # 3 * 4^2 = 48 fits mode 0; 3 * 7^2 = 147 does not (7^2 alone would)
    frame = np.array([[[104] * 3, [107] * 3]], np.uint8)
    np.testing.assert_array_equal(bench.visited_modes(state, frame), [[1, 2]])


def test_floor_bytes(bench):
    # grey, 1 mode, 1 visited: frame 1 + mask 1 + count 2 + weight 8 + read 8 + written 8
    assert bench.floor_bytes_per_pixel(1, 1.0, 1.0) == 28
    # BGR, 2 modes, 1 visited: 3 + 1 + 2 + 16 + 16 + 16
    assert bench.floor_bytes_per_pixel(3, 2.0, 1.0) == 54
    # batched: frame and mask per frame, (count 2 + 2 * 4 * 3 floats) per K frames
    assert bench.batched_bytes_per_pixel(1, 1.0, 1) == 28
    assert bench.batched_bytes_per_pixel(1, 1.0, 4) == 2 + 26 / 4


def test_model_floor_matches_a_model_warmed_alike(bench):
    rng = np.random.default_rng(5)
    frames = [rng.integers(90, 110, (6, 8), dtype=np.uint8) for _ in range(5)]
    f = bench.model_floor(frames, warm=7, span=4, every=2)
    twin = fastmog.cpu.BackgroundSubtractorMOG2()
    for i in range(7):
        twin.apply(frames[i % 5])
    np.testing.assert_array_equal(f["warm_counts"], twin.mode_counts())
    assert 1 <= f["visited"] <= f["modes"] <= 5
    assert f["bytes"] == bench.floor_bytes_per_pixel(1, f["modes"], f["visited"])


def test_camera_counts_compare_the_top_left_tile(bench):
    native = np.random.default_rng(1).integers(1, 6, (bench.CAMERAS * 3, 4), dtype=np.uint8)
    tall = np.concatenate([np.tile(c, (2, 2)) for c in native.reshape(bench.CAMERAS, 3, 4)])
    tall = np.pad(tall.reshape(bench.CAMERAS, 6, 8),
                  ((0, 0), (0, bench.CAM_H - 6), (0, bench.CAM_W - 8)))
    assert bench.camera_counts_differ(tall, native) == 0
    tall[5, 1, 2] += 1
    assert bench.camera_counts_differ(tall, native) == 1
