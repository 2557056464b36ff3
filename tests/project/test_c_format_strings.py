"""The C extension's format strings: every one handed to PyUnicode_FromFormat
uses only conversions that Python 3.11 expands (issue 12's fix of Stream's
repr, which printed "%zx" literally there; the repr itself is tested in
tests/foundation/test_stream_event.py)."""
import pathlib
import re

import pytest

import fastmog

# Conversions PyUnicode_FromFormat expands on every supported Python (3.11+);
# of the flags, 3.11 knows only 0 (width and precision it knows).
_SPEC = re.compile(r"%([-+ #0]*)(\d*)(\.\d+)?(hh|h|ll|l|z|j|t)?([a-zA-Z%])")
_OK = {("", "c"), ("", "d"), ("l", "d"), ("ll", "d"), ("z", "d"), ("", "i"), ("l", "i"),
       ("ll", "i"), ("z", "i"), ("", "u"), ("l", "u"), ("ll", "u"), ("z", "u"), ("", "x"),
       ("", "s"), ("", "p"), ("", "A"), ("", "U"), ("", "V"), ("", "S"), ("", "R"),
       ("", "%")}
_FORMATTERS = re.compile(r"\b(PyUnicode_FromFormat|PyErr_Format|PyErr_WarnFormat|fm_cuda_error"
                         r"|fm_cuda_fail|FM_CUDA_CHECK)\s*\(")
_LITERALS = re.compile(r'"((?:[^"\\\n]|\\.)*)"((?:\s*"(?:[^"\\\n]|\\.)*")*)')


def _call_args(text, start):
    """The text from `start` (just after an opening parenthesis) to its
    matching close, skipping string literals."""
    depth, i = 1, start
    while depth:
        c = text[i]
        if c == '"':
            i += 1
            while text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        i += 1
    return text[start:i - 1]


def _source_dir():
    src = pathlib.Path(fastmog.__file__).resolve().parents[2] / "src"
    if not (src / "stream.c").is_file():
        pytest.skip("fastmog is not imported from a source checkout")
    return src


def test_no_format_python_3_11_cannot_expand():
    """Every format string handed to PyUnicode_FromFormat (directly or
    through PyErr_Format, fm_cuda_error, fm_cuda_fail, FM_CUDA_CHECK) uses
    only conversions Python 3.11 expands; on 3.11 an unknown one, such as the
    old build's %zx in Stream's repr, makes the rest of the text print
    literally. Reads the sources next to the fastmog under test: the old
    checkout has four %zx."""
    bad = []
    for path in sorted(_source_dir().glob("*.c")):
        text = path.read_text()
        for call in _FORMATTERS.finditer(text):
            args = _call_args(text, call.end())
            for lit in _LITERALS.finditer(args):
                fmt = lit.group(0)
                for spec in _SPEC.finditer(fmt):
                    flags, length, conv = spec.group(1), spec.group(4) or "", spec.group(5)
                    if flags not in ("", "0") or (length, conv) not in _OK:
                        line = text.count("\n", 0, call.start()) + 1
                        bad.append(f"{path.name}:{line}: {spec.group(0)}")
    assert not bad, "conversions Python 3.11 prints literally: " + ", ".join(bad)
