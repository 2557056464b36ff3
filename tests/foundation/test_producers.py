"""Device memory from any producer through the front door: hand-written CUDA
Array Interface objects (lists or tuples, (H, W, 1), pitched strides, every
`stream` value), raw pointers, objects whose cuda() gives planes, CuPy and
PyTorch; and the clear refusals."""
import numpy as np
import pytest

import fastmog
from conftest import random_image

pytestmark = pytest.mark.gpu


class Producer:
    """A CUDA Array Interface written by hand, as decoders hand them out."""

    def __init__(self, array, *, as_list=False, version=3, stream="absent", extra=None,
                 strides=None, shape=None):
        self.array = array          # keeps the memory alive, like a real owner
        cai = dict(array.__cuda_array_interface__)
        cai["version"] = version
        if shape is not None:
            cai["shape"] = shape
        if strides is not None:
            cai["strides"] = strides
        if stream == "absent":
            cai.pop("stream", None)
        else:
            cai["stream"] = stream
        if as_list:
            cai["shape"] = list(cai["shape"])
            cai["data"] = list(cai["data"])
            if cai.get("strides") is not None:
                cai["strides"] = list(cai["strides"])
        cai.update(extra or {})
        self.__cuda_array_interface__ = cai


@pytest.fixture
def cupy():
    return pytest.importorskip("cupy")


def _host_mask(frame, **kw):
    return fastmog.cpu.BackgroundSubtractorMOG2(**kw).apply(frame)


@pytest.mark.parametrize("as_list", [False, True])
@pytest.mark.parametrize("version", [2, 3])
def test_lists_and_tuples_give_the_same_masks(cupy, rng, stream, as_list, version):
    frame = random_image(rng, (48, 64), np.uint8)
    producer = Producer(cupy.asarray(frame), as_list=as_list, version=version, stream=None)
    mask = fastmog.BackgroundSubtractorMOG2().apply(producer, stream=stream)
    assert np.array_equal(mask.download(stream=stream), _host_mask(frame))


def test_luma_plane_shaped_h_w_1_is_grey(cupy, rng, stream):
    frame = random_image(rng, (48, 64), np.uint8)
    plane = cupy.asarray(frame)[:, :, None]             # [H, W, 1], as PyNvVideoCodec gives
    producer = Producer(plane, as_list=True, stream=0)  # and stream 0, as it does
    view = fastmog.asgpumat(producer, stream=stream)
    assert view.shape == (48, 64, 1)
    mask = fastmog.BackgroundSubtractorMOG2().apply(producer, stream=stream)
    assert np.array_equal(mask.download(stream=stream), _host_mask(frame))


def test_pitched_rows_are_read_where_they_lie(cupy, rng, stream):
    frame = random_image(rng, (40, 50, 3), np.uint8)
    padded = cupy.zeros((40, 64, 3), np.uint8)
    padded[:, :50] = cupy.asarray(frame)
    producer = Producer(padded[:, :50], strides=(64 * 3, 3, 1))
    view = fastmog.asgpumat(producer, stream=stream)
    assert view.pitch == 64 * 3 and view.ptr == padded.data.ptr
    assert np.array_equal(view.download(stream=stream), frame)


@pytest.mark.parametrize("value", [None, 0, 1, 2, "own"])
def test_every_stream_value_orders_the_work(cupy, rng, stream, value):
    """The producer writes the memory on its stream behind long kernels; the
    consumer must see the written values, never the zeros before them."""
    frame = random_image(rng, (256, 256), np.uint8)
    source = cupy.asarray(frame)
    dev = cupy.zeros((256, 256), np.uint8)
    cupy.cuda.Device().synchronize()
    # 0 and 1 name the legacy stream: the producer's must be a blocking one.
    producer_stream = cupy.cuda.Stream(non_blocking=value not in (0, 1))
    with producer_stream:
        spin = cupy.ones((2048, 2048), np.float32)
        for _ in range(8):
            spin = spin @ spin / 2048
        dev[...] = source
    handle = {None: None, 0: 0, 1: 1, 2: 2, "own": producer_stream.ptr}[value]
    if value in (None, 2):
        producer_stream.synchronize()            # None promises ready; 2 is another stream
    out = fastmog.asgpumat(Producer(dev, stream=handle), stream=stream).download(stream=stream)
    assert np.array_equal(out, frame)


def test_raw_device_pointer(cupy, rng, stream):
    frame = random_image(rng, (30, 40, 4), np.uint8)
    block = cupy.zeros((30, 256), np.uint8)
    block[:, :160] = cupy.asarray(frame.reshape(30, 160))
    # CuPy wrote on its current stream, still maybe running: name it (its
    # null stream is the legacy default stream, 1 in the protocol), or the
    # read races the write (racecheck's timing showed it)
    written_on = cupy.cuda.get_current_stream().ptr or 1
    ptr = fastmog.DevicePointer(block.data.ptr, (30, 40, 4), np.uint8, pitch=256, owner=block,
                                stream=written_on)
    del block                                    # the pointer's owner keeps it
    mask = fastmog.BackgroundSubtractorMOG2().apply(ptr, stream=stream)
    assert np.array_equal(mask.download(stream=stream), _host_mask(frame))


def test_object_whose_cuda_gives_planes(cupy, rng, stream):
    y = random_image(rng, (32, 48), np.uint8)

    class DecodedFrame:                          # the shape of PyNvVideoCodec's frames
        def __init__(self):
            self.planes = [Producer(cupy.asarray(y)[:, :, None], as_list=True, stream=0),
                           Producer(cupy.zeros((16, 24, 2), np.uint8), as_list=True, stream=0)]

        def cuda(self):
            return self.planes

    mask = fastmog.BackgroundSubtractorMOG2().apply(DecodedFrame(), stream=stream)
    assert np.array_equal(mask.download(stream=stream), _host_mask(y))


def test_torch_and_cupy_through_dlpack_and_cai(cupy, rng, stream):
    torch = pytest.importorskip("torch")
    frame = random_image(rng, (24, 32, 3), np.uint8)
    expect = _host_mask(frame)
    for obj in (cupy.asarray(frame), torch.from_numpy(frame).cuda()):
        got = fastmog.BackgroundSubtractorMOG2().apply(obj, stream=stream).download(stream=stream)
        assert np.array_equal(got, expect)


def test_unviewable_producers_say_what_is_wrong(cupy, stream):
    dev = cupy.zeros((8, 8), np.uint8)
    cases = [
        (ValueError, "'shape'", Producer(dev, extra={"shape": "8x8"})),
        (ValueError, "'shape'", Producer(dev, extra={"shape": (64,)})),
        (TypeError, "'typestr'", Producer(dev, extra={"typestr": "<i8"})),
        (ValueError, "'data'", Producer(dev, extra={"data": 5})),
        (ValueError, "'strides'", Producer(dev, extra={"strides": (8,)})),
        (ValueError, "'stream'", Producer(dev, extra={"stream": "default"})),
        (ValueError, "'mask'", Producer(dev, extra={"mask": object()})),
        (ValueError, "not aligned", Producer(cupy.zeros(65, np.uint8)[1:].view(np.uint16)
                                             .reshape(4, 8))),
        (ValueError, "not in device memory", fastmog.DevicePointer(
            np.zeros(64, np.uint8).ctypes.data, (8, 8))),
    ]
    sub = fastmog.BackgroundSubtractorMOG2()
    for error, match, bad in cases:
        with pytest.raises(error, match=match):
            fastmog.asgpumat(bad, stream=stream)
    with pytest.raises(ValueError, match="read-only"):
        sub.apply(np.zeros((8, 8), np.uint8), stream=stream,
                  fgmask=fastmog.asgpumat(Producer(dev, extra={"data": (dev.data.ptr, True)}),
                                          stream=stream))
    assert sub.frame_count == 0                  # the refused call changed nothing


def test_misaligned_float_frame_is_refused_before_the_kernel(cupy, stream):
    raw = cupy.zeros(4 * 64 + 1, np.uint8)
    bad = Producer(raw, shape=(8, 8), extra={"typestr": "<f4",
                                             "data": (raw.data.ptr + 1, False)})
    with pytest.raises(ValueError, match="not aligned"):
        fastmog.BackgroundSubtractorMOG2().apply(bad, stream=stream)
    stream.synchronize()                         # the context is intact
