"""Every command in a `bash` block of the README and of docs/*.md is run or
checked. Each `python -m fastmog` command runs on a fresh directory: its
example names (video.mp4, cdnet/highway, frames/, cam1.mp4, cams/*.mkv, the
scheduler address) are replaced by real test data, long runs are cut to a few
frames, and it must exit 0 and write what its --out, --preview and --trace
name. The other commands are checked: the script, benchmark or test path
exists, the pip extra is declared, pytest knows the option. A command of a kind the
tests do not know fails here."""
import functools
import glob
import os
import pathlib
import re
import shlex
import subprocess
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
TWO_COMMANDS = 'pip install ".[test]" && python -m fastmog'   # tests/project/test_readme.py


def _commands():
    """(document, line number, command) of every line of every bash block."""
    found = []
    for doc in DOCUMENTS:
        text = doc.read_text()
        for block in re.finditer(r"```bash\n(.*?)```", text, re.S):
            first = text.count("\n", 0, block.start(1)) + 1
            for k, line in enumerate(block.group(1).splitlines()):
                command = line.split("#", 1)[0].strip()
                if command:
                    found.append((doc.relative_to(ROOT).as_posix(), first + k, command))
    return found


COMMANDS = _commands()


def _kind(command):
    if command.startswith(TWO_COMMANDS):
        return "two commands"
    if command.startswith("python -m fastmog"):
        return "fastmog"
    if command.startswith("pip install "):
        return "pip"
    if command.startswith("bash .ci/"):
        return "ci"
    if command.startswith("python -m pytest"):
        return "pytest"
    if re.fullmatch(r"python benchmarks/\w+\.py", command):
        return "benchmark"
    return None


def _ids(commands):
    return [f"{doc}:{line}" for doc, line, _ in commands]


FASTMOG = [c for c in COMMANDS if _kind(c[2]) == "fastmog"]
CHECKED = [c for c in COMMANDS if _kind(c[2]) not in ("fastmog", "two commands")]


def test_every_command_is_run_or_checked():
    unknown = [f"{doc}:{line}: {command}" for doc, line, command in COMMANDS
               if _kind(command) is None]
    assert not unknown, "commands no test runs or checks:\n" + "\n".join(unknown)
    # the main job's page and the README's first example are where they are
    docs = {doc for doc, _, _ in FASTMOG}
    assert {"README.md", "docs/cli.md"} <= docs, docs
    assert len([c for c in FASTMOG if c[0] == "docs/cli.md"]) >= 7
    assert any(doc == "README.md" and _kind(c) == "two commands" for doc, _, c in COMMANDS)


@functools.lru_cache(maxsize=None)
def _pytest_options():
    """The options pytest takes here: its own, its plugins' (pytest-benchmark's)
    and this suite's (conftest.py)."""
    r = subprocess.run([sys.executable, "-m", "pytest", "--help"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return frozenset(re.findall(r"(?<![\w-])(--[a-z][a-z-]*|-[a-zA-Z])\b", r.stdout))


def _extras():
    pyproject = (ROOT / "pyproject.toml").read_text()
    section = pyproject.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    return set(re.findall(r"^(\w+) = ", section, re.M))


@pytest.mark.parametrize("doc, line, command", CHECKED, ids=_ids(CHECKED))
def test_command_is_checked(doc, line, command):
    kind = _kind(command)
    args = shlex.split(command)
    where = f"{doc}:{line}: {command}"
    if kind == "pip":
        for requirement in args[2:]:
            m = re.fullmatch(r'(fastmog|\.)\[([\w,]+)\]', requirement)
            assert m, f"{where}: pip installs something other than fastmog's extras"
            assert set(m.group(2).split(",")) <= _extras(), where
    elif kind == "ci":
        script = ROOT / args[1]
        assert script.is_file(), where
        r = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert r.returncode == 0, f"{where}: {r.stderr}"
        # extra arguments of the CI scripts go to pytest, after gpu-wheels'
        # CUDA major
        rest = args[2:]
        if args[1] == ".ci/gpu-wheels":
            assert rest[:1] in (["cu12"], ["cu13"]), where
            rest = rest[1:]
        assert set(rest) <= _pytest_options(), where
    elif kind == "pytest":
        for a in args[3:]:
            if a.startswith("-"):
                # a short option carries its value attached (-rs: -r with "s")
                assert (a if a.startswith("--") else a[:2]) in _pytest_options(), where
            else:
                assert (ROOT / a).exists(), where
    elif kind == "benchmark":
        assert (ROOT / args[1]).is_file(), where
    else:
        pytest.fail(f"{where}: no check for {kind}")


def _cams(tmp_path):
    cv2 = pytest.importorskip("cv2")
    cams = tmp_path / "cams"
    cams.mkdir()
    rng = np.random.default_rng(3)
    for k in range(2):
        w = cv2.VideoWriter(str(cams / f"cam{k}.mkv"), cv2.VideoWriter_fourcc(*"FFV1"), 25,
                            (64, 48))
        for _ in range(5):
            w.write(rng.integers(0, 256, (48, 64, 3), dtype=np.uint8))
        w.release()
    return sorted(glob.glob(str(cams / "*.mkv")))


def _run(args, cwd):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    r = subprocess.run([sys.executable, "-m", "fastmog", *args], cwd=cwd, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"fastmog {' '.join(args)}\n{r.stderr}"
    return r


def _option(args, name):
    return args[args.index(name) + 1] if name in args else None


@pytest.mark.parametrize("doc, line, command", FASTMOG, ids=_ids(FASTMOG))
def test_fastmog_command_runs(doc, line, command, data_dir, tmp_path):
    written = shlex.split(command)[3:]
    several = "--workers" in written or "--scheduler" in written
    if several:
        pytest.importorskip("distributed")
    names = {
        "video.mp4": str(data_dir / "opencv_samples_video" / "vtest.avi"),
        "cdnet/highway": str(data_dir / "cdnet_subset_fall"),
        "frames/": str(data_dir / "cdnet_subset_traffic" / "input"),
        "cam1.mp4": str(data_dir / "opencv_samples_video" / "vtest.avi"),
        "cam2.mp4": str(data_dir / "opencv_samples_video" / "tree.avi"),
        "/shared/masks": str(tmp_path / "shared_masks"),
    }
    missing = [a for a in written if a in names and a != "/shared/masks"
               and not pathlib.Path(names[a]).exists()]
    if missing:
        pytest.skip(f"the test data in {data_dir} lacks what {missing[0]} stands for")
    if "zones.json" in written:                   # a zone inside tree.avi's 320 x 240 too
        (tmp_path / "zones.json").write_text(
            '[{"name": "walkway", "polygon": [[0, 130], [200, 110], [200, 239], [0, 239]]}]')
    args = []
    for a in written:
        if a == "cams/*.mkv":
            args += _cams(tmp_path)
        else:
            args.append(names.get(a, a))
    camera = next((a for a in args if a.startswith("rtsp://camera.local")), None)
    if camera is not None:                        # a live camera: a loopback RTSP server
        from live_servers import RtspServer, ts_clip

        with RtspServer(ts_clip(tmp_path)[1]) as server:
            _run([server.url if a == camera else a for a in args] + ["--frames", "3"],
                 tmp_path)
        assert len(list((tmp_path / _option(args, "--out")).glob("mask_*.png"))) == 3
        return
    if "cdnet/highway" not in written:            # a CDnet sequence is scored whole
        args += ["--frames", "3"]
    scheduler = next((a for a in written if a.startswith("tcp://")), None)
    if scheduler:
        from distributed import LocalCluster

        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                          dashboard_address=None) as cluster:
            _run([cluster.scheduler_address if a == scheduler else a for a in args], tmp_path)
    else:
        _run(args, tmp_path)

    out = _option(args, "--out")
    if out is not None:
        out = tmp_path / out
        if several:   # one folder of masks per source
            sources = next(i for i, a in enumerate(args) if a.startswith("-"))  # inputs first
            assert len([p for p in out.iterdir() if p.is_dir()]) == sources, (out, sources)
        elif out.suffix:
            assert out.stat().st_size > 0
        else:
            assert len(list(out.glob("mask_*.png"))) == 3
    for option in ("--preview", "--trace"):
        path = _option(args, option)
        if path is not None:
            assert (tmp_path / path).stat().st_size > 0, option
