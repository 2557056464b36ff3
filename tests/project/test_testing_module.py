"""fastmog.testing, the helpers the tests and benchmarks share, is a plain
module of the library: it imports without pytest or OpenCV, loads nothing of
the application wing, and finds the test data as the suite does."""
import subprocess
import sys

import fastmog.testing

HIDE = """
import sys
class Hide:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("pytest", "_pytest", "cv2"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Hide())
"""


def test_imports_without_pytest_or_opencv_and_without_the_application():
    code = HIDE + ("import fastmog.testing as t\n"
                   "print(sorted(m for m in sys.modules if m.startswith('fastmog.app')))\n"
                   "print(sorted(t.DEFAULT_TIER) == sorted(t.SEQUENCES))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out == ["[]", "True"]


def test_find_test_data_takes_the_environment_first(tmp_path, monkeypatch):
    monkeypatch.setenv("FASTMOG_TEST_DATA", str(tmp_path / "anywhere"))
    assert fastmog.testing.find_test_data(tmp_path) == tmp_path / "anywhere"
    monkeypatch.delenv("FASTMOG_TEST_DATA")
    assert fastmog.testing.find_test_data(tmp_path) is None
    (tmp_path / ".testdata" / "clips").mkdir(parents=True)        # clips alone are no data
    assert fastmog.testing.find_test_data(tmp_path) is None
    (tmp_path / ".testdata" / "cdnet").mkdir()
    assert fastmog.testing.find_test_data(tmp_path) == tmp_path / ".testdata"
