"""NV12/NV21 -> BGR/RGB against cv2.cvtColor: every (Y, U, V) triple on the
host, random padded frames in every layout, bad input; and the GPU kernel
(fastmog.nv12_to_bgr) against the host and cv2."""
import os
import pathlib
import shutil
import subprocess

import numpy as np
import pytest

import fastmog
import fastmog.cpu

cv2 = pytest.importorskip("cv2")

ROOT = pathlib.Path(__file__).resolve().parents[2]

# (rgb, nv21) -> the cv2 code computing the same thing
CODES = {
    (False, False): cv2.COLOR_YUV2BGR_NV12,
    (True, False): cv2.COLOR_YUV2RGB_NV12,
    (False, True): cv2.COLOR_YUV2BGR_NV21,
    (True, True): cv2.COLOR_YUV2RGB_NV21,
}
FLAGS = sorted(CODES)


def host_convert(nv21):
    return fastmog.cpu.nv21_to_bgr if nv21 else fastmog.cpu.nv12_to_bgr


def cv2_frame(y, uv):
    """The single (H*3/2) x W array cv2 takes, from planes of any layout."""
    h, w = y.shape[:2]
    return np.vstack([y.reshape(h, w), np.ascontiguousarray(uv).reshape(h // 2, w)])


def mismatches(a, b):
    assert a.shape == b.shape and a.dtype == b.dtype == np.uint8
    return int(np.count_nonzero(a != b))


# ---- every (Y, U, V) triple ---------------------------------------------------
#
# What is exhaustive here: in OpenCV's NV12 path (and ours) an output pixel is
# a function of three bytes only - its own luma and the one chroma pair of its
# 2x2 block (no interpolation, no neighbours; the random frames below check
# that positions and pitches pick the right bytes). Blue uses (Y, U) and red
# (Y, V), but green uses all three, so no smaller set of triples settles green
# without assuming the very formula under test: all 2^24 triples it is. That is
# just one 4096 x 4096 frame (2^22 blocks = 65,536 (U, V) pairs x 64 blocks of
# 4 distinct luma values), converted in about 0.1 s.

@pytest.fixture(scope="module")
def all_triples():
    """An NV12 frame holding each (Y, U, V) triple in exactly one pixel, as
    (frame, y, uv) with y, uv views of the frame."""
    k = np.arange(1 << 22, dtype=np.uint32).reshape(2048, 2048)  # block index
    u = (k & 255).astype(np.uint8)
    v = (k >> 8 & 255).astype(np.uint8)
    group = (k >> 16).astype(np.uint8)                             # 0..63
    frame = np.empty((4096 * 3 // 2, 4096), np.uint8)
    y, uv = frame[:4096], frame[4096:].reshape(2048, 2048, 2)
    for dy in range(2):
        for dx in range(2):
            y[dy::2, dx::2] = 4 * group + 2 * dy + dx
    uv[..., 0], uv[..., 1] = u, v
    return frame, y, uv


def test_the_frame_holds_every_triple_once(all_triples):
    frame, y, uv = all_triples
    u = np.repeat(np.repeat(uv[..., 0], 2, 0), 2, 1).astype(np.uint32)
    v = np.repeat(np.repeat(uv[..., 1], 2, 0), 2, 1).astype(np.uint32)
    key = y.astype(np.uint32) << 16 | u << 8 | v
    seen = np.zeros(1 << 24, bool)
    seen[key.ravel()] = True
    assert key.size == 1 << 24 and seen.all()  # 2^24 pixels, 2^24 distinct keys


@pytest.mark.parametrize("rgb,nv21", FLAGS)
def test_every_triple_equals_cv2(all_triples, rgb, nv21):
    frame, _, _ = all_triples
    expected = cv2.cvtColor(frame, CODES[rgb, nv21])
    assert mismatches(host_convert(nv21)(frame, rgb=rgb), expected) == 0


def test_every_triple_through_separate_planes(all_triples):
    frame, y, uv = all_triples
    out = np.empty((4096, 4096, 3), np.uint8)
    got = fastmog.cpu.nv12_to_bgr(y.copy(), uv.copy(), out=out)
    assert got is out
    assert mismatches(out, cv2.cvtColor(frame, cv2.COLOR_YUV2BGR_NV12)) == 0


# ---- layouts -------------------------------------------------------------------

SIZES = [(2, 2), (2, 6), (4, 4), (6, 10), (16, 18), (48, 64), (120, 162), (480, 640)]


def padded(rng, shape, pad, offset=0):
    """A random uint8 array of `shape` whose rows are `pad` bytes longer than
    needed (and start `offset` bytes into the row), as a view of a bigger one."""
    h, w = shape[:2]
    big = rng.integers(0, 256, (h, w + pad + offset) + tuple(shape[2:]), dtype=np.uint8)
    return big[:, offset:offset + w]


@pytest.mark.parametrize("h,w", SIZES)
@pytest.mark.parametrize("rgb,nv21", FLAGS)
def test_random_padded_planes(rng, h, w, rgb, nv21):
    y = padded(rng, (h, w), pad=int(rng.integers(1, 40)), offset=int(rng.integers(0, 3)))
    uv3 = padded(rng, (h // 2, w // 2, 2), pad=int(rng.integers(1, 9)))
    uv2 = padded(rng, (h // 2, w), pad=int(rng.integers(1, 9)))
    convert = host_convert(nv21)
    for uv in (uv3, uv2):
        expected = cv2.cvtColor(cv2_frame(y, uv), CODES[rgb, nv21])
        assert mismatches(convert(y, uv, rgb=rgb), expected) == 0
        out_big = np.zeros((h, w + 5, 3), np.uint8)
        out = out_big[:, 2:2 + w]  # padded rows, offset start
        assert convert(y, uv, out=out, rgb=rgb) is out
        assert mismatches(out, expected) == 0
        assert not out_big[:, :2].any() and not out_big[:, 2 + w:].any()  # nothing outside


@pytest.mark.parametrize("h,w", SIZES)
def test_single_array_layout(rng, h, w):
    frame = padded(rng, (h * 3 // 2, w), pad=7)  # row padding, as a decoder's pitch
    expected = cv2.cvtColor(np.ascontiguousarray(frame), cv2.COLOR_YUV2BGR_NV12)
    assert mismatches(fastmog.cpu.nv12_to_bgr(frame), expected) == 0
    assert mismatches(fastmog.cpu.nv12_to_bgr(frame[..., None]), expected) == 0  # H x W x 1
    # the same bytes as two planes give the same result
    y, uv = frame[:h], frame[h:]
    assert mismatches(fastmog.cpu.nv12_to_bgr(y, uv), expected) == 0


def test_planes_apart_in_one_buffer(rng):
    # the chroma plane need not follow the luma rows: here a gap of 3 rows
    h, w = 36, 50
    buf = rng.integers(0, 256, (h + 3 + h // 2, 64), dtype=np.uint8)
    y, uv = buf[:h, :w], buf[h + 3:, :w]
    expected = cv2.cvtColor(cv2_frame(y, uv), cv2.COLOR_YUV2BGR_NV12)
    assert mismatches(fastmog.cpu.nv12_to_bgr(y, uv), expected) == 0


def test_chroma_is_not_interpolated(rng):
    # one bright chroma block in a flat frame changes exactly its 2x2 pixels
    y = np.full((8, 8), 120, np.uint8)
    uv = np.full((4, 4, 2), 128, np.uint8)
    uv[1, 2] = (250, 10)
    out = fastmog.cpu.nv12_to_bgr(y, uv)
    changed = (out != out[0, 0]).any(axis=2)
    assert changed[2:4, 4:6].all() and changed.sum() == 4
    assert mismatches(out, cv2.cvtColor(cv2_frame(y, uv), cv2.COLOR_YUV2BGR_NV12)) == 0


# ---- bad input -------------------------------------------------------------------

def good(h=4, w=6):
    return np.zeros((h, w), np.uint8), np.zeros((h // 2, w // 2, 2), np.uint8)


BAD = [
    # (description, args, kwargs, exception, message fragment)
    ("y not an array", lambda: ([[0, 0], [0, 0], [0, 0]],), {}, TypeError, "y must be a numpy"),
    ("y uint16", lambda: (np.zeros((6, 4), np.uint16),), {}, TypeError, "y must be uint8"),
    ("y float", lambda: (np.zeros((6, 4), np.float32),), {}, TypeError, "y must be uint8"),
    ("y bool", lambda: (np.zeros((6, 4), bool),), {}, TypeError, "y must be uint8"),
    ("y 1-D", lambda: (np.zeros(24, np.uint8),), {}, ValueError, "y must be 2-D"),
    ("y 3 channels", lambda: (np.zeros((6, 4, 3), np.uint8),), {}, ValueError, "y must be 2-D"),
    ("rows not 3k", lambda: (np.zeros((8, 4), np.uint8),), {}, ValueError, "multiple of 3"),
    ("odd width", lambda: (np.zeros((6, 5), np.uint8),), {}, ValueError, "even"),
    ("odd height, planes", lambda: (np.zeros((5, 4), np.uint8), np.zeros((2, 2, 2), np.uint8)),
     {}, ValueError, "even"),
    ("empty", lambda: (np.zeros((0, 4), np.uint8),), {}, ValueError, "even, non-zero"),
    ("y strided columns", lambda: (np.zeros((6, 8), np.uint8)[:, ::2],), {}, ValueError,
     "y must have contiguous"),
    ("y rows reversed", lambda: (np.zeros((6, 4), np.uint8)[::-1],), {}, ValueError,
     "y must have contiguous"),
    ("y transposed", lambda: (np.zeros((4, 6), np.uint8).T,), {}, ValueError,
     "y must have contiguous"),
    ("uv not an array", lambda: (good()[0], 3), {}, TypeError, "uv must be a numpy"),
    ("uv int8", lambda: (good()[0], good()[1].astype(np.int8)), {}, TypeError, "uv must be uint8"),
    ("uv wrong height", lambda: (good()[0], np.zeros((3, 3, 2), np.uint8)), {}, ValueError,
     "uv must be"),
    ("uv wrong width", lambda: (good()[0], np.zeros((2, 4), np.uint8)), {}, ValueError,
     "uv must be"),
    ("uv 3 planes", lambda: (good()[0], np.zeros((2, 3, 3), np.uint8)), {}, ValueError,
     "uv must be"),
    ("uv strided pairs", lambda: (good()[0], np.zeros((2, 6, 2), np.uint8)[:, ::2]), {},
     ValueError, "uv must have contiguous"),
    ("uv swapped pair order", lambda: (good()[0], np.zeros((2, 3, 2), np.uint8)[:, :, ::-1]),
     {}, ValueError, "uv must have contiguous"),
    ("matrix unknown", lambda: good(), {"matrix": "bt709"}, ValueError, "'bt601'"),
    ("matrix with a NUL", lambda: good(), {"matrix": "bt601\0x"}, ValueError, "'bt601'"),
    ("matrix not str", lambda: good(), {"matrix": 601}, TypeError, "matrix must be a str"),
    ("out wrong shape", lambda: good(), {"out": np.zeros((4, 6), np.uint8)}, ValueError,
     r"out must have shape \(4, 6, 3\)"),
    ("out wrong size", lambda: good(), {"out": np.zeros((4, 4, 3), np.uint8)}, ValueError,
     "out must have shape"),
    ("out float", lambda: good(), {"out": np.zeros((4, 6, 3), np.float32)}, TypeError,
     "out must be uint8"),
    ("out channels reversed", lambda: good(), {"out": np.zeros((4, 6, 3), np.uint8)[..., ::-1]},
     ValueError, "out must have contiguous"),
    ("out not an array", lambda: good(), {"out": bytearray(72)}, TypeError, "out must be a numpy"),
    ("unknown keyword", lambda: good(), {"stream": None}, TypeError, "stream"),
]


@pytest.mark.parametrize("desc,args,kwargs,exc,match", BAD, ids=[b[0] for b in BAD])
def test_bad_input(desc, args, kwargs, exc, match):
    with pytest.raises(exc, match=match):
        fastmog.cpu.nv12_to_bgr(*args(), **kwargs)


def test_out_read_only():
    y, uv = good()
    out = np.zeros((4, 6, 3), np.uint8)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        fastmog.cpu.nv12_to_bgr(y, uv, out=out)


def test_out_overlapping_the_input():
    buf = np.zeros(200, np.uint8)
    y, uv = buf[:24].reshape(4, 6), buf[24:36].reshape(2, 6)
    with pytest.raises(ValueError, match="overlaps"):
        fastmog.cpu.nv12_to_bgr(y, uv, out=buf[30:102].reshape(4, 6, 3))
    fastmog.cpu.nv12_to_bgr(y, uv, out=buf[36:108].reshape(4, 6, 3))  # adjacent is fine


def test_bad_input_writes_nothing(rng):
    y = rng.integers(0, 256, (4, 6), dtype=np.uint8)
    uv = rng.integers(0, 256, (2, 3, 2), dtype=np.uint8)
    out = np.full((4, 6, 3), 7, np.uint8)
    with pytest.raises(ValueError):
        fastmog.cpu.nv12_to_bgr(y, uv[:1], out=out)
    with pytest.raises(TypeError):
        fastmog.cpu.nv12_to_bgr(y, uv.astype(np.int16), out=out)
    with pytest.raises(ValueError):
        fastmog.cpu.nv12_to_bgr(y, uv, out=out, matrix="xyz")
    assert (out == 7).all()
    fastmog.cpu.nv12_to_bgr(y, uv, out=out)
    assert not (out == 7).all()


# ---- GPU: fastmog.nv12_to_bgr(y, uv=None, *, stream, out=None, rgb=False, matrix) --

def on_device(cp, array, pad=0, offset=0):
    """A cupy copy of `array` with rows `pad` columns longer than needed, the
    data starting `offset` columns into each row (strides as a decoder's
    pitch; a column is 2 bytes for H/2 x W/2 x 2 chroma)."""
    h, w = array.shape[:2]
    big = cp.zeros((h, w + pad + offset) + array.shape[2:], cp.uint8)
    view = big[:, offset:offset + w]
    view[...] = cp.asarray(array)
    cp.cuda.get_current_stream().synchronize()  # cupy's writes done before ours read
    return view


@pytest.mark.gpu
@pytest.mark.parametrize("rgb", [False, True])
def test_gpu_every_triple(all_triples, stream, rgb):
    cp = pytest.importorskip("cupy")
    frame, y, uv = all_triples
    expected = cv2.cvtColor(frame, CODES[rgb, False])
    # inputs stay referenced until downloaded: cupy's pool knows nothing of our stream
    y_dev, uv_dev, frame_dev = on_device(cp, y), on_device(cp, uv), on_device(cp, frame)
    got = fastmog.nv12_to_bgr(y_dev, uv_dev, stream=stream, rgb=rgb)
    assert isinstance(got, fastmog.GpuMat) and got.shape == (4096, 4096, 3)
    assert mismatches(got.download(stream=stream), expected) == 0
    single = fastmog.nv12_to_bgr(frame_dev, stream=stream, rgb=rgb)
    assert mismatches(single.download(stream=stream), expected) == 0


@pytest.mark.gpu
def test_gpu_nv21_every_triple(all_triples, stream):
    cp = pytest.importorskip("cupy")
    if not hasattr(fastmog, "nv21_to_bgr"):
        pytest.skip("fastmog.nv21_to_bgr is not bound (the launcher supports FM_YUV_NV21)")
    frame, _, _ = all_triples
    frame_dev = on_device(cp, frame)
    for rgb in (False, True):
        got = fastmog.nv21_to_bgr(frame_dev, stream=stream, rgb=rgb)
        assert mismatches(got.download(stream=stream),
                          cv2.cvtColor(frame, CODES[rgb, True])) == 0


@pytest.mark.gpu
def test_gpu_kernel_without_binding(tmp_path):
    """Builds tests/video/nv12_kernel_check.cu (the launcher against the host
    reference: all 2^24 triples, random frames in 8 pitch layouts, refusals)."""
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if not os.path.exists(nvcc):
        pytest.skip("nvcc not found")
    exe = tmp_path / "nv12_kernel_check"
    subprocess.run([nvcc, "-O2", "-std=c++17", "-arch=native", "-I", str(ROOT / "cuda"),
                    str(ROOT / "tests" / "video" / "nv12_kernel_check.cu"),
                    str(ROOT / "cuda" / "nv12.cu"),
                    str(ROOT / "src" / "nv12_loop.c"), "-o", str(exe)], check=True)
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300)
    print(run.stdout)
    assert run.returncode == 0, run.stdout + run.stderr


# (pad, offset) of the luma and chroma rows: 4-byte aligned rows and bases take
# the kernel's 32-bit path, the others its byte path.
PITCHES = [((0, 0), (0, 0)), ((64, 0), (32, 0)), ((1, 0), (3, 0)), ((4, 1), (8, 2)),
           ((13, 3), (0, 1))]


@pytest.mark.gpu
@pytest.mark.parametrize("h,w", SIZES + [(1080, 1920), (34, 1002)])
@pytest.mark.parametrize("luma,chroma", PITCHES)
def test_gpu_random_padded_planes(rng, stream, h, w, luma, chroma):
    cp = pytest.importorskip("cupy")
    y = rng.integers(0, 256, (h, w), dtype=np.uint8)
    uv = rng.integers(0, 256, (h // 2, w // 2, 2), dtype=np.uint8)
    expected = cv2.cvtColor(cv2_frame(y, uv), cv2.COLOR_YUV2BGR_NV12)
    assert mismatches(fastmog.cpu.nv12_to_bgr(y, uv), expected) == 0
    y_dev = on_device(cp, y, *luma)
    uv_devs = (on_device(cp, uv, *chroma),                          # H/2 x W/2 x 2
               on_device(cp, uv.reshape(h // 2, w), *chroma))       # H/2 x W
    for uv_dev in uv_devs:
        got = fastmog.nv12_to_bgr(y_dev, uv_dev, stream=stream)
        assert mismatches(got.download(stream=stream), expected) == 0


@pytest.mark.gpu
@pytest.mark.parametrize("h,w", [(2, 2), (36, 50), (1080, 1920)])
def test_gpu_single_array_and_shared_allocation(rng, stream, h, w):
    cp = pytest.importorskip("cupy")
    frame = rng.integers(0, 256, (h * 3 // 2, w), dtype=np.uint8)
    expected = cv2.cvtColor(frame, cv2.COLOR_YUV2BGR_NV12)
    for pad in (0, 3, 128):
        dev = on_device(cp, frame, pad)  # one allocation, chroma right after luma
        got = fastmog.nv12_to_bgr(dev, stream=stream)
        assert mismatches(got.download(stream=stream), expected) == 0
        got = fastmog.nv12_to_bgr(dev[:h], dev[h:], stream=stream)  # as two planes
        assert mismatches(got.download(stream=stream), expected) == 0


@pytest.mark.gpu
def test_gpu_gpumat_inputs_and_out(rng, stream):
    h, w = 64, 86
    y = rng.integers(0, 256, (h, w), dtype=np.uint8)
    uv = rng.integers(0, 256, (h // 2, w), dtype=np.uint8)
    expected = cv2.cvtColor(cv2_frame(y, uv), cv2.COLOR_YUV2RGB_NV12)
    y_mat = fastmog.GpuMat.from_array(y, stream=stream)
    uv_mat = fastmog.GpuMat.from_array(uv, stream=stream)
    out = fastmog.GpuMat((h + 4, w + 6, 3))
    out.fill(9, stream=stream)
    view = out[2:2 + h, 3:3 + w]
    got = fastmog.nv12_to_bgr(y_mat, uv_mat, stream=stream, out=view, rgb=True)
    assert mismatches(got.download(stream=stream), expected) == 0
    whole = out.download(stream=stream)
    assert mismatches(whole[2:2 + h, 3:3 + w], expected) == 0
    border = np.ones(whole.shape[:2], bool)
    border[2:2 + h, 3:3 + w] = False
    assert (whole[border] == 9).all()  # nothing written outside the view


@pytest.mark.gpu
def test_gpu_bad_input(stream):
    cp = pytest.importorskip("cupy")
    y, uv = cp.zeros((4, 6), cp.uint8), cp.zeros((2, 3, 2), cp.uint8)
    with pytest.raises(TypeError, match="stream"):
        fastmog.nv12_to_bgr(y, uv)
    with pytest.raises(ValueError):
        fastmog.nv12_to_bgr(cp.zeros((4, 5), cp.uint8), stream=stream)
    with pytest.raises(ValueError):
        fastmog.nv12_to_bgr(y, cp.zeros((3, 3, 2), cp.uint8), stream=stream)
    with pytest.raises(ValueError, match="'bt601'"):
        fastmog.nv12_to_bgr(y, uv, stream=stream, matrix="bt709")
    with pytest.raises(TypeError):
        fastmog.nv12_to_bgr(y.astype(cp.uint16), uv, stream=stream)
    with pytest.raises(ValueError):
        fastmog.nv12_to_bgr(y, uv, stream=stream, out=fastmog.GpuMat((4, 4, 3)))


def test_too_tall_frames_are_refused_before_any_work():
    """Past the launcher's grid (1,048,560 luma rows) the arguments are refused
    with ValueError before the stream or the device is looked at."""
    rows = 1_048_560 + 2
    y = np.zeros((rows, 2), np.uint8)
    uv = np.zeros((rows // 2, 1, 2), np.uint8)
    for convert in (fastmog.nv12_to_bgr, fastmog.nv21_to_bgr):
        with pytest.raises(ValueError, match="y has 1048562 rows; at most 1048560"):
            convert(y, uv, stream=None)
        frame = np.zeros((rows // 2 * 3, 2), np.uint8)  # luma rows, then chroma rows
        with pytest.raises(ValueError, match="at most 1572840"):
            convert(frame, stream=None)
        with pytest.raises(ValueError, match="uv has 524281 rows; at most 524280"):
            convert(y[:-2], uv, stream=None)
