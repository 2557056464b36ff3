"""Zero-copy interop with CuPy and PyTorch, with stream ordering."""
import gc

import numpy as np
import pytest

import fastmog
from conftest import random_image

pytestmark = pytest.mark.gpu


def slow_then_value(stream, m, value):
    """Queues enough work that a consumer which does not wait would read stale
    data, ending with every pixel == value."""
    m.fill(0, stream=stream)
    big = fastmog.GpuMat((8192, 8192, 4), np.float32)
    for _ in range(30):
        big.fill(1.0, stream=stream)
    m.fill(value, stream=stream)
    return big


def test_cupy_views_gpumat_through_cuda_array_interface(rng, stream):
    cp = pytest.importorskip("cupy")
    src = random_image(rng, (120, 97, 3), np.uint8)
    m = fastmog.GpuMat.from_array(src, stream=stream)
    stream.synchronize()
    cai = m.__cuda_array_interface__
    assert cai["version"] == 3 and cai["strides"] == (m.pitch, 3, 1) and cai["typestr"] == "|u1"
    arr = cp.asarray(m)
    assert arr.data.ptr == m.ptr
    assert np.array_equal(cp.asnumpy(arr), src)


def test_torch_reads_gpumat_through_dlpack_in_stream_order(stream):
    torch = pytest.importorskip("torch")
    m = fastmog.GpuMat((512, 512), np.float32)
    keep = slow_then_value(stream, m, 9.0)
    t = torch.from_dlpack(m)  # torch passes its current stream; we make it wait
    assert t.data_ptr() == m.ptr and t.shape == (512, 512)
    assert t.sum().item() == 9.0 * 512 * 512
    del keep


def test_dlpack_versioned_and_legacy_capsules(rng, stream):
    m = fastmog.GpuMat.from_array(random_image(rng, (8, 8, 4), np.float32), stream=stream)
    assert m.__dlpack_device__() == (2, m.device)
    legacy = m.__dlpack__(stream=-1)
    versioned = m.__dlpack__(stream=-1, max_version=(1, 0))
    assert "dltensor" in repr(legacy) and "dltensor_versioned" in repr(versioned)
    del legacy, versioned  # unconsumed capsules release their reference
    with pytest.raises(BufferError):
        m.__dlpack__(copy=True)
    with pytest.raises(ValueError):
        m.__dlpack__(stream=0)


def test_gpumat_outlives_closing_while_dlpack_export_alive(rng, stream):
    torch = pytest.importorskip("torch")
    src = random_image(rng, (64, 64), np.float32)
    m = fastmog.GpuMat.from_array(src, stream=stream)
    t = torch.from_dlpack(m)
    m.close()
    gc.collect()
    assert np.array_equal(t.cpu().numpy(), src)


def test_asgpumat_views_cupy_and_torch_without_copy(rng, stream):
    cp = pytest.importorskip("cupy")
    torch = pytest.importorskip("torch")
    src = random_image(rng, (90, 160, 3), np.uint8)
    c = cp.asarray(src)
    g = fastmog.asgpumat(c, stream=stream)
    assert g.ptr == c.data.ptr and g.shape == src.shape
    assert np.array_equal(g.download(stream=stream), src)
    t = torch.from_numpy(src).cuda()
    g2 = fastmog.asgpumat(t, stream=stream)
    assert g2.ptr == t.data_ptr()
    assert np.array_equal(g2.download(stream=stream), src)
    # the owner is kept alive by the view
    del t, c
    gc.collect()
    assert np.array_equal(g2.download(stream=stream), src)
    assert np.array_equal(g.download(stream=stream), src)


def test_asgpumat_through_dlpack_only(rng, stream):
    torch = pytest.importorskip("torch")
    src = random_image(rng, (33, 47, 4), np.float32)
    t = torch.from_numpy(src).cuda()

    class OnlyDLPack:
        def __dlpack__(self, **kw):
            return t.__dlpack__(**kw)

        def __dlpack_device__(self):
            return t.__dlpack_device__()

    g = fastmog.asgpumat(OnlyDLPack(), stream=stream)
    assert g.ptr == t.data_ptr()
    g.fill((1.0, 2.0, 3.0, 4.0), stream=stream)
    stream.synchronize()
    assert torch.equal(t[0, 0].cpu(), torch.tensor([1.0, 2.0, 3.0, 4.0]))


def test_asgpumat_orders_after_the_producer_stream(stream):
    cp = pytest.importorskip("cupy")
    producer = cp.cuda.Stream(non_blocking=True)
    with producer:
        a = cp.zeros((4096, 4096), cp.float32)
        for _ in range(20):
            a += 1.0
        cai_stream = a.__cuda_array_interface__.get("stream")
        g = fastmog.asgpumat(a, stream=stream)
    out = g.download(stream=stream)
    if cai_stream is None:
        producer.synchronize()  # CuPy did not tell us its stream; nothing to order
    assert (out == 20.0).all()


def test_asgpumat_refuses_unusable_objects(stream):
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match="neither"):
        fastmog.asgpumat(object(), stream=stream)
    with pytest.raises(ValueError):
        fastmog.asgpumat(torch.zeros((2, 2, 2), device="cuda"), stream=stream)
    with pytest.raises(ValueError):
        fastmog.asgpumat(torch.zeros((4, 6), device="cuda")[:, ::2], stream=stream)
    with pytest.raises(TypeError):
        fastmog.asgpumat(torch.zeros((4, 4), dtype=torch.int64, device="cuda"), stream=stream)


def test_wrapped_foreign_streams(stream):
    torch = pytest.importorskip("torch")
    cp = pytest.importorskip("cupy")
    ts = torch.cuda.Stream()
    w = fastmog.Stream.wrap(ts)
    assert w.handle == ts.cuda_stream
    cs = cp.cuda.Stream()
    w2 = fastmog.Stream.wrap(cs)
    assert w2.handle == cs.ptr
    m = fastmog.GpuMat((16, 16))
    m.fill(5, stream=w)
    assert (m.download(stream=w) == 5).all()


def test_cuda_array_interface_entries_stay_alive_while_their_code_runs(rng, stream):
    """A producer whose read-only flag's __bool__ empties the interface dict
    and its lists: fastmog reads entries it holds itself, never freed ones (a
    list freed by the clear is at once reused by the next list made)."""
    src = fastmog.GpuMat.from_array(random_image(rng, (6, 8), np.uint8), stream=stream)

    class Flag:
        def __init__(self, cai):
            self.cai = cai

        def __bool__(self):
            data = self.cai["data"]
            self.cai.clear()
            data.clear()
            self.junk = [[16, 16, 16] for _ in range(8)]  # take the freed lists' places
            return False

    class Producer:
        @property
        def __cuda_array_interface__(self):
            cai = {"shape": [6, 8], "typestr": "|u1", "strides": [src.pitch, 1], "version": 3,
                   "stream": None}
            cai["data"] = [src.ptr, Flag(cai)]
            return cai

    view = fastmog.asgpumat(Producer(), stream=stream)
    assert view.shape == (6, 8) and view.ptr == src.ptr
    assert np.array_equal(view.download(stream=stream), src.download(stream=stream))
