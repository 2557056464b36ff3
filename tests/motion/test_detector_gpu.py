"""The GPU motion detector (fastmog.MotionDetector) against the host one
(fastmog.cpu.MotionDetector, itself equal to OpenCV composed by hand in
tests/motion/test_detector.py): every frame's fraction, light switch, zone
scores, regions and events the same, on random moving masks with shadows
and on a real sequence's masks, with and without zones, morphology and
min_area; the GPU morphology's binarizing first pass; bad input refused."""
import numpy as np
import pytest

import fastmog
from fastmog import cpu
from fastmog.testing import iter_frames

from test_motion_host import squares

pytestmark = pytest.mark.gpu

POLYGONS = [[(0, 0), (59, 0), (59, 71), (0, 71)],
            [(60, 5), (119, 30), (100, 71), (55, 60)],
            [(-20, 50), (140, 50), (60, 90)]]           # crosses the border


def moving_masks(rng, n, h, w):
    """Blobs that move, with shadows (127) and noise, as a subtractor gives."""
    for i in range(n):
        m = np.zeros((h, w), np.uint8)
        for k in range(3):
            cx, cy = (7 * i + 30 * k) % w, (3 * i + 20 * k) % h
            m[max(0, cy - 6):cy + 6, max(0, cx - 9):cx + 9] = 255
        m[rng.random((h, w)) < 0.02] = 255
        m[rng.random((h, w)) < 0.05] = 127
        if i == n // 2:
            m[...] = 255                                 # a light switch
        yield m


def assert_same_frame(got, want):
    assert got.index == want.index and got.light_switch == want.light_switch
    assert got.fraction == want.fraction
    assert len(got.zones) == len(want.zones)
    for g, w in zip(got.zones, want.zones):
        assert g.score == w.score and g.motion == w.motion
        np.testing.assert_array_equal(g.regions.stats, w.regions.stats)
        np.testing.assert_array_equal(g.regions.centroids, w.regions.centroids)
    assert got.ended == want.ended


@pytest.mark.parametrize("options", [
    dict(zones=POLYGONS, morphology=("open", 3, "ellipse"), min_area=4, threshold=0.01),
    dict(morphology=None, connectivity=4),
    dict(zones=POLYGONS[:1], morphology=("close", (5, 3)), min_area=10, light_switch=0.5),
])
def test_every_frame_equals_the_host_detectors(rng, stream, options):
    host, gpu = cpu.MotionDetector(**options), fastmog.MotionDetector(**options)
    for mask in moving_masks(rng, 30, 72, 120):
        dev = fastmog.GpuMat.from_array(mask, stream=stream)
        assert_same_frame(gpu.update(dev, stream=stream), host.update(mask))
    assert gpu.finish() == host.finish()
    assert gpu.events == host.events and host.events


def test_what_leaves_the_gpu_fits_a_kilobyte_for_up_to_32_regions(stream):
    # two zones: the whole frame's fraction is a count (one header back), each
    # zone's first copy holds its last frame's regions and a few more
    h, w = 96, 400
    zones = [[(0, 0), (199, 0), (199, 95), (0, 95)], [(200, 0), (399, 0), (399, 95), (200, 95)]]
    det = fastmog.MotionDetector(zones=zones, morphology=None)
    mask = np.zeros((h, w), np.uint8)
    for k in range(32):                      # 32 squares, 16 in each zone
        x = 200 * (k // 16) + 12 * (k % 16) + 2
        mask[10:15, x:x + 5] = 255
    dev = fastmog.GpuMat.from_array(mask, stream=stream)
    det.update(dev, stream=stream)           # the first frame learns the counts
    t = fastmog.Timer(nvtx=False)
    m = det.update(dev, stream=stream, timer=t)
    want = cpu.MotionDetector(zones=zones, morphology=None)
    want.update(mask)
    assert_same_frame(m, want.update(mask))
    counts = [z.regions.count for z in m.zones]
    assert counts == [16, 16]
    back = {r.name: [] for r in t.records}
    for r in t.records:
        back[r.name].append(r.bytes_written)
    assert back["foreground_pixels"] == [24]
    assert back["connected_components"] == [24 * (1 + c + 2) for c in counts]
    sent = sum(r.bytes_written for r in t.records
               if r.name in ("foreground_pixels", "connected_components"))
    assert sent <= 1024, sent


def test_a_whole_frame_reads_eight_spare_rows_in_its_one_copy(stream):
    # without zones the frame's one labelling reads its last count and 8
    # more: 32 regions still fit a kilobyte, and a jump of 6 regions needs
    # no second copy
    det = fastmog.MotionDetector()
    det.update(squares(32, 6, 12, 480), stream=stream)
    t = fastmog.Timer(nvtx=False)
    for n in (32, 38):
        m = det.update(squares(n, 6, 12, 480), stream=stream, timer=t)
        assert m.zones[0].regions.count == n
    sent = [r.bytes_written for r in t.records if r.name == "connected_components"]
    assert sent == [24 * (1 + 32 + 8)] * 2 and sent[0] <= 1024


def test_update_cameras_equals_each_cameras_own_update(rng, stream):
    # five cameras in one stack, a sixth with zones on its own; every
    # camera's frames and events equal its host detector's
    options = dict(morphology=("open", 3), min_area=4, threshold=0.01)
    host = [cpu.MotionDetector(**options) for _ in range(5)]
    host.append(cpu.MotionDetector(zones=POLYGONS[:2], **options))
    gpu = [fastmog.MotionDetector(**options) for _ in range(5)]
    gpu.append(fastmog.MotionDetector(zones=POLYGONS[:2], **options))
    streams = [moving_masks(rng, 24, 72, 120) for _ in range(6)]
    t = fastmog.Timer(nvtx=False)
    for frame in range(24):
        masks = [next(s) for s in streams]
        devs = [fastmog.GpuMat.from_array(m, stream=stream) for m in masks]
        got = fastmog.update_cameras(gpu, devs, stream=stream, timer=t)
        want = cpu.update_cameras(host, masks)
        for g, w in zip(got, want):
            assert_same_frame(g, w)
    for g, h in zip(gpu, host):
        assert g.finish() == h.finish()
        assert g.events == h.events
    assert any(h.events for h in host)
    # per frame: one labelling for the five stacked cameras, two for the zoned
    # one; one morphology call (one launch a pass) for the five, one for it
    names = [r.name for r in t.records]
    assert names.count("connected_components") == 24 * (1 + 2)
    assert names.count("morphology") == 24 * (1 + 1)


def test_update_cameras_refuses_bad_input(stream):
    d = fastmog.MotionDetector()
    mask = fastmog.GpuMat((8, 8))
    with pytest.raises(ValueError, match="one mask per"):
        fastmog.update_cameras([d], [mask, mask], stream=stream)
    with pytest.raises(ValueError, match="twice"):
        fastmog.update_cameras([d, d], [mask, mask], stream=stream)
    with pytest.raises(TypeError, match="MotionDetector"):
        fastmog.update_cameras([cpu.MotionDetector()], [mask], stream=stream)
    with pytest.raises(TypeError, match="stream"):
        fastmog.update_cameras([d], [mask], stream=None)


def test_a_real_sequence(data_dir, stream):
    sub = fastmog.BackgroundSubtractorMOG2()
    host = cpu.MotionDetector(zones=POLYGONS[:2], min_area=6)
    gpu = fastmog.MotionDetector(zones=POLYGONS[:2], min_area=6)
    t = fastmog.Timer(nvtx=False)
    moving = 0
    for frame in iter_frames(data_dir, "CAVIAR2", 60):
        mask = sub.apply(frame, stream=stream)
        result = gpu.update(mask, stream=stream, timer=t)
        assert_same_frame(result, host.update(mask.download(stream=stream)))
        moving += 0 < result.fraction < 0.5
    assert moving > 10
    # per frame: the whole frame's foreground counted, each zone's regions, timed
    names = [r.name for r in t.records]
    assert names.count("foreground_pixels") == 60
    assert names.count("connected_components") == 2 * 60


def test_morphology_makes_the_mask_binary_in_its_first_pass(rng, stream):
    mask = rng.choice(np.array([0, 127, 255], np.uint8), (40, 70))
    for fg in (255, 127):
        binary = np.where(mask == fg, 255, 0).astype(np.uint8)
        for op, kernel in (("open", 3), ("dilate", 1), ("close", (5, 3))):
            got = fastmog.morphology(mask, op, kernel, stream=stream, foreground=fg)
            np.testing.assert_array_equal(got.download(stream=stream),
                                          cpu.morphology(binary, op, kernel))
    with pytest.raises(ValueError, match="foreground"):
        fastmog.morphology(mask, "open", 3, stream=stream, foreground=256)


def test_zone_regions_equal_the_hosts_on_the_masked_pixels(rng, stream):
    mask = np.where(rng.random((90, 130)) < 0.4, 255, 0).astype(np.uint8)
    zone = np.where(rng.random((90, 130)) < 0.7, 255, 0).astype(np.uint8)
    want = cpu.connected_components(mask & zone)
    got = fastmog.connected_components(mask, stream=stream, zone=zone)
    np.testing.assert_array_equal(got.stats, want.stats)
    np.testing.assert_array_equal(got.centroids, want.centroids)
    with pytest.raises(ValueError, match="zone"):
        fastmog.connected_components(mask, stream=stream, zone=zone[:, :-1])


def test_a_producers_device_mask_is_taken_where_it_lies(rng, stream):
    cupy = pytest.importorskip("cupy")
    host, gpu = cpu.MotionDetector(min_area=3), fastmog.MotionDetector(min_area=3)
    for mask in moving_masks(rng, 6, 72, 120):
        assert_same_frame(gpu.update(cupy.asarray(mask), stream=stream), host.update(mask))


def test_bad_masks_are_refused(stream):
    det = fastmog.MotionDetector()
    with pytest.raises(TypeError, match="stream"):
        det.update(np.zeros((8, 8), np.uint8), stream=None)
    with pytest.raises(TypeError, match="uint8"):
        det.update(fastmog.GpuMat((8, 8, 3), np.uint8), stream=stream)
    det.update(np.zeros((8, 8), np.uint8), stream=stream)
    with pytest.raises(ValueError, match="8x8"):
        det.update(fastmog.GpuMat((8, 9), np.uint8), stream=stream)
    assert det.index == 1


def test_update_cameras_takes_an_element_given_as_an_array(rng, stream):
    # the stack groups detectors by their options: an array element too
    element = np.array([[0, 1, 0], [1, 1, 1], [0, 1, 0]], np.uint8)
    options = dict(morphology=("open", element), min_area=2)
    gpu = [fastmog.MotionDetector(**options) for _ in range(3)]
    host = [cpu.MotionDetector(**options) for _ in range(3)]
    masks = [next(moving_masks(rng, 1, 72, 120)) for _ in range(3)]
    t = fastmog.Timer(nvtx=False)
    got = fastmog.update_cameras(gpu, [fastmog.GpuMat.from_array(m, stream=stream)
                                       for m in masks], stream=stream, timer=t)
    for g, w in zip(got, cpu.update_cameras(host, masks)):
        assert_same_frame(g, w)
    assert [r.name for r in t.records].count("connected_components") == 1


def test_the_cleaned_mask_is_one_buffer_for_every_frame(rng, stream):
    # no device allocation per frame for the cleaned mask: morphology writes
    # the same GpuMat each time, and the frames still equal the host's
    gpu, host = fastmog.MotionDetector(min_area=3), cpu.MotionDetector(min_area=3)
    buffers = set()
    for mask in moving_masks(rng, 8, 48, 64):
        dev = fastmog.GpuMat.from_array(mask, stream=stream)
        assert_same_frame(gpu.update(dev, stream=stream), host.update(mask))
        buffers.add(id(gpu._cleaned))
    assert len(buffers) == 1
