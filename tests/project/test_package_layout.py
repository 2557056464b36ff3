"""The package's shape: `import fastmog` loads the library and none of the
application wing (fastmog.app), the library imports nothing of the wing, and
no module of python/fastmog imports, directly or around a circle, one that
imports it back."""
import ast
import pathlib
import subprocess
import sys
from importlib.machinery import EXTENSION_SUFFIXES

import fastmog

PACKAGE = pathlib.Path(fastmog.__file__).resolve().parent
# Lazy by design, not to break a circle: pytest loads the plugin (a pytest11
# entry point) in every project of the environment, so it imports fastmog (numpy,
# the CUDA runtime) only when a test asks for it.
LAZY_BY_DESIGN = {"pytest_plugin.py"}


def test_import_fastmog_loads_no_application_module():
    code = ("import sys, fastmog\n"
            "print(sorted(m for m in sys.modules if m.startswith('fastmog.app')))\n"
            "print(callable(fastmog.process_sources), fastmog.SourceResult.__name__,\n"
            "      fastmog.local_client.__name__)\n"
            "print('fastmog.app._dask' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out == ["[]", "True SourceResult local_client", "True"]
    assert {"process_sources", "SourceResult", "local_client"} <= set(fastmog.__all__)


def _module_name(path):
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name):
    """Whether `name` is a module of the package (the C extension by its stub,
    or by the built file where the stub is not installed beside it)."""
    base = PACKAGE.parent.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or base.with_suffix(".pyi").is_file() \
        or (base / "__init__.py").is_file() \
        or any(base.with_name(base.name + s).is_file() for s in EXTENSION_SUFFIXES)


def _import_nodes(tree):
    """Every import statement of a module, in function bodies too (a lazy
    import closes a circle as surely as one at the top), but none under
    `if TYPE_CHECKING:`, which never runs."""
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) \
                and node.test.id == "TYPE_CHECKING":
            skipped.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return [n for n in ast.walk(tree)
            if isinstance(n, (ast.Import, ast.ImportFrom)) and id(n) not in skipped]


def _imports(path, name):
    """The package modules that module `name` (at `path`) imports."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in _import_nodes(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module
            targets = [f"{base}.{a.name}" if _is_module(f"{base}.{a.name}") else base
                       for a in node.names]
        yield from (t for t in targets if t == "fastmog" or t.startswith("fastmog."))


def import_graph():
    files = sorted(PACKAGE.rglob("*.py"))
    return {_module_name(p): set(_imports(p, _module_name(p))) - {_module_name(p)}
            for p in files}


def test_the_package_has_no_import_circle():
    graph = import_graph()
    assert "fastmog.app.cli" in graph["fastmog.__main__"]
    assert "fastmog.video" in graph["fastmog"]
    state, path = {}, []

    def visit(module):
        state[module] = "open"
        path.append(module)
        for target in sorted(graph.get(module, ())):
            if state.get(target) == "open":
                circle = path[path.index(target):] + [target]
                raise AssertionError("import circle: " + " -> ".join(circle))
            if target not in state:
                visit(target)
        path.pop()
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module)


def test_the_library_never_imports_the_application():
    # but for its one lazy door: fastmog.process_sources and its kin, on first use
    doors = {("fastmog", "fastmog.app._dask"), ("fastmog.__main__", "fastmog.app.cli")}
    leaks = {(module, t) for module, targets in import_graph().items()
             if not module.startswith("fastmog.app")
             for t in targets if t.startswith("fastmog.app")}
    assert leaks == doors


def test_no_function_imports_the_package_it_belongs_to():
    """Function-local imports of fastmog worked around import circles; the
    one left is fastmog.__getattr__, the library's lazy door to the
    application wing."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name in LAZY_BY_DESIGN:
            continue
        for fn in ast.walk(ast.parse(path.read_text())):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                own = (isinstance(node, ast.Import)
                       and any(a.name.split(".")[0] == "fastmog" for a in node.names)) or \
                      (isinstance(node, ast.ImportFrom)
                       and (node.level or (node.module or "").split(".")[0] == "fastmog"))
                if own:
                    found.append((str(path.relative_to(PACKAGE)), fn.name, node.lineno))
    assert [(f, fn) for f, fn, _ in found] == [("__init__.py", "__getattr__")], found
