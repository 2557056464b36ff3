"""The host-side half of issue 21's lifetime work, no GPU needed: the rules
are written where they are owned, raw stream handles are documented as
trusted, and the event stack exists once. (Closing and holding a Stream
needs a CUDA device to make one: tests/robustness/test_lifetimes_gpu.py.)"""
import pathlib
import re

import fastmog

SRC = pathlib.Path(__file__).resolve().parents[2] / "src"


def test_memory_reuse_rule_is_written_in_devmem_c():
    text = (SRC / "devmem.c").read_text()
    assert "THE RULE" in text and "every use of the buffer on every stream" in text
    assert "serial" in text


def test_stream_rule_is_written_in_stream_c():
    text = (SRC / "stream.c").read_text()
    assert "THE RULE" in text and "closing is as good as closed" in text


def test_raw_stream_handles_are_documented_as_trusted():
    assert "trusted" in fastmog.Stream.wrap.__doc__
    assert "__cuda_stream__" in fastmog.Stream.wrap.__doc__
    assert "trusted" in fastmog.GpuMat.__dlpack__.__doc__
    assert "trusted" in fastmog._fastmog.asgpumat.__doc__


def test_stream_close_documents_refusal_and_idempotence():
    doc = fastmog.Stream.close.__doc__
    assert "ValueError" in doc and "Idempotent" in doc


def test_event_stack_is_written_once():
    """keepalive.c's fences and timer.c's timing events share one stack."""
    sources = {p.name: p.read_text() for p in SRC.glob("*.c")}
    growers = [name for name, text in sources.items()
               if re.search(r"PyMem_Realloc\(stack->events", text)]
    assert growers == ["keepalive.c"], growers
    assert "fm_event_stack_pop" in sources["timer.c"]
