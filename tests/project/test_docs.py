"""The documents hold together: the README stays short and every link of the
README and of docs/*.md leads to a file (and heading) that exists; the pages
that restate the code (options, exit statuses, public names, requirements,
the tests behind each guarantee, the layout) match it."""
import ast
import pathlib
import re
import subprocess
import sys

import pytest

import fastmog

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
DOCUMENTS = [ROOT / "README.md"] + sorted(DOCS.glob("*.md"))


def _text(path):
    return path.read_text()


def _without_code(text):
    return re.sub(r"```.*?```", "", text, flags=re.S)


def _slug(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to -."""
    s = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return s.replace(" ", "-")


def _anchors(path):
    return {_slug(h) for h in re.findall(r"^#+ (.*)$", _without_code(_text(path)), re.M)}


def _section(text, heading):
    return text.split(heading + "\n", 1)[1].split("\n## ", 1)[0]


def test_readme_is_short():
    lines = _text(ROOT / "README.md").count("\n")
    assert lines <= 210, f"README.md has {lines} lines; move detail into docs/"


@pytest.mark.parametrize("doc", DOCUMENTS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_links_lead_to_files_and_headings(doc):
    bad = []
    for target in re.findall(r"\]\(([^)\s]+)\)", _without_code(_text(doc))):
        if re.match(r"[a-z]+:", target):          # http(s), mailto: not checked here
            continue
        path, _, anchor = target.partition("#")
        file = (doc.parent / path).resolve() if path else doc
        if not file.exists():
            bad.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
            bad.append(f"{target}: no heading #{anchor} in {file.name}")
    assert not bad, f"{doc.name}: " + "; ".join(bad)


def test_readme_leads_to_every_document():
    readme = _text(ROOT / "README.md")
    pages = {p.name for p in DOCS.glob("*.md")} | {"pytest_plugin.md"}
    missing = sorted(p for p in pages if f"](docs/{p})" not in readme)
    assert not missing, f"the README's read-on list lacks {missing}"


def test_every_option_and_exit_status_is_on_the_cli_page():
    cli = _text(DOCS / "cli.md")
    r = subprocess.run([sys.executable, "-m", "fastmog", "--help"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    options = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", r.stdout)) - {"--help"}
    missing = sorted(o for o in options if not re.search(re.escape(o) + r"(?![a-z-])", cli))
    assert not missing, f"docs/cli.md lacks {missing}"
    statuses = re.findall(r"(?:^\s*|; )(\d+) ", r.stdout.split("exit status:", 1)[1])
    table = _section(cli, "## Exit status")
    assert statuses and all(f"\n| {s} |" in table for s in statuses), statuses


def test_every_public_name_is_on_the_api_page():
    api = _text(DOCS / "api.md")
    missing = sorted(n for n in fastmog.__all__ if not re.search(r"`[^`]*\b" + n + r"\b", api))
    assert not missing, f"docs/api.md lacks {missing}"


def test_speed_highlights_are_rows_of_the_full_table():
    rows = [line for line in _section(_text(ROOT / "README.md"), "## Speed").splitlines()
            if line.startswith("| ")]
    full = _section(_text(DOCS / "guide.md"), "## Speed").splitlines()
    assert len(rows) > 3
    assert [r for r in rows if r not in full] == []


@pytest.mark.parametrize(("page", "install"), [("README.md", "## Install"),
                                                ("docs/install.md", None)])
def test_requirements_match_the_build(page, install):
    """The requirements name every architecture built (8.6 for 86) and the
    Python required; the install text (a section, or the whole page) names
    the default architecture list."""
    text = _text(ROOT / page)
    requirements = _section(text, "## Requirements")
    search = _text(ROOT / "nvcc_search.py")       # where setup.py takes them from
    archs = re.search(r'DEFAULT_ARCHS = "([0-9;]+)"', search).group(1).split(";")
    named = set(re.findall(r"\b(\d+)\.(\d)\b", requirements))
    assert {(a[:-1], a[-1]) for a in archs} <= named, (archs, named)
    python = re.search(r'requires-python = ">=(\d+\.\d+)"', _text(ROOT / "pyproject.toml")).group(1)
    assert f"**Python**: {python} or newer" in requirements
    assert f"`{';'.join(archs)}`" in (text.split(install, 1)[1] if install else text)


def _functions(path):
    tree = ast.parse(path.read_text())
    return {node.name for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}


def test_every_guarantee_names_tests_that_exist():
    text = _text(DOCS / "reliability.md")
    rows = [line for line in text.splitlines()
            if line.startswith("| ") and not line.startswith("| Guarantee |")]
    assert len(rows) > 20
    bad = []
    for row in rows:
        tests = re.findall(r"`(tests/[\w/.]+\.py)::(\w+)`", row)
        if not tests:
            bad.append(f"names no test under tests/: {row[:80]}")
        for file, name in tests:
            path = ROOT / file
            if not path.is_file():
                bad.append(f"{file}: no such file")
            elif name not in _functions(path):
                bad.append(f"{file}::{name}: no such test")
    assert not bad, "docs/reliability.md:\n" + "\n".join(bad)


def test_layout_is_one_delimited_section_naming_files_that_exist():
    text = _text(DOCS / "contributing.md")
    assert text.count("<!-- layout: begin") == 1 and text.count("<!-- layout: end -->") == 1
    layout = text.split("<!-- layout: begin", 1)[1].split("<!-- layout: end -->", 1)[0]
    assert "\n## Layout\n" in layout
    tree = {p.name for folder in ("src", "cuda", "python/fastmog", "tests", ".ci")
            for p in (ROOT / folder).rglob("*")} | {p.name for p in ROOT.iterdir()}
    named = set(re.findall(r"`([\w.]+\.(?:c|h|cu|py|pyi))`", layout))
    missing = sorted(named - tree)
    assert not missing, f"docs/contributing.md's layout names files that are gone: {missing}"
