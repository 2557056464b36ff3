"""Pinned host memory: arrays, ownership, the pool."""
import gc

import numpy as np
import pytest

import fastmog

pytestmark = pytest.mark.gpu


def test_pinned_constructors():
    a = fastmog.pinned_empty((3, 5), np.float32)
    assert a.shape == (3, 5) and a.dtype == np.float32 and a.flags.c_contiguous
    assert fastmog.is_pinned(a) and a.flags.writeable
    z = fastmog.pinned_zeros(17)
    assert z.dtype == np.uint8 and not z.any() and fastmog.is_pinned(z)
    like = fastmog.pinned_like(np.ones((4, 6, 3), np.int16))
    assert like.shape == (4, 6, 3) and like.dtype == np.int16 and fastmog.is_pinned(like)
    assert fastmog.is_pinned(a[1:, ::2]) and not fastmog.is_pinned(np.array(a))
    with pytest.raises(TypeError):
        fastmog.pinned_empty((2,), object)
    with pytest.raises(ValueError):
        fastmog.pinned_empty((-1, 2))


def test_views_keep_the_block_alive():
    a = fastmog.pinned_empty((1000,), np.int64)
    a[:] = np.arange(1000)
    view = a[500:]
    in_use = fastmog.memory_stats()["pinned_in_use"]
    del a
    gc.collect()
    assert fastmog.memory_stats()["pinned_in_use"] == in_use
    assert view[0] == 500 and view[-1] == 999
    del view
    gc.collect()
    assert fastmog.memory_stats()["pinned_in_use"] < in_use


def test_pool_reuses_blocks():
    for _ in range(3):
        fastmog.pinned_empty((2160, 3840), np.uint8)
    allocs = fastmog.memory_stats()["pinned_host_allocs"]
    for _ in range(200):
        a = fastmog.pinned_empty((2160, 3840), np.uint8)
        a[0, 0] = 1
        del a
    assert fastmog.memory_stats()["pinned_host_allocs"] == allocs


def test_empty_cache_returns_cached_blocks():
    a = fastmog.pinned_empty((1 << 20,), np.uint8)
    del a
    assert fastmog.memory_stats()["pinned_cached"] > 0
    fastmog.empty_cache()
    assert fastmog.memory_stats()["pinned_cached"] == 0


def test_foreign_pinned_memory_is_recognised():
    torch = pytest.importorskip("torch")
    t = torch.empty(1000, dtype=torch.uint8).pin_memory()
    assert fastmog.is_pinned(t.numpy())
