"""The package's shape: no import cycle among its modules, the public names at the root, and the modules that
re-export names other modules own."""

import ast
import importlib.metadata
import re
import sys
from pathlib import Path

import mssr_hf

PACKAGE = Path(mssr_hf.__file__).resolve().parent


def module_files() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package (a package is its ``__init__.py``)."""
    files = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = ("mssr_hf", *path.relative_to(PACKAGE).with_suffix("").parts)
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return files


def imported_modules(name: str, path: Path, modules: set[str]) -> set[str]:
    """The package's modules that ``name`` imports anywhere in its file (top level or inside a function).
    ``from .x import y`` imports ``x``, or ``x.y`` when that is a module; the parent packages Python runs on the way
    to a module are not counted (``mssr_hf.tasks.spec`` does not import ``mssr_hf.tasks``)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: level 1 is the module's own package, level 2 its parent, ...
                anchor = package.split(".")[: package.count(".") + 2 - node.level]
                base = ".".join([*anchor, node.module] if node.module else anchor)
            found.update(f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names)
    return {m for m in found if m in modules and m != name}


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every cycle a depth-first walk of ``graph`` closes (empty: the graph is acyclic)."""
    cycles, state, path = [], {}, []

    def visit(module: str) -> None:
        state[module] = "open"
        path.append(module)
        for dependency in sorted(graph[module]):
            if state.get(dependency) == "open":
                cycles.append(path[path.index(dependency) :] + [dependency])
            elif dependency not in state:
                visit(dependency)
        path.pop()
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module)
    return cycles


def test_no_import_cycle_among_the_packages_modules():
    files = module_files()
    graph = {name: imported_modules(name, path, set(files)) for name, path in files.items()}
    assert graph["mssr_hf.demo"] >= {"mssr_hf.report", "mssr_hf.continual"}  # the walk sees function-level imports
    assert "mssr_hf.scoring" in graph["mssr_hf.tasks.spec"]  # ... and relative imports from a subpackage
    assert import_cycles(graph) == []


def test_the_cycle_finder_finds_cycles():
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []


def test_public_names_at_the_root():
    from mssr_hf.continual import ContinualRunner

    assert mssr_hf.ContinualRunner is ContinualRunner
    assert len(mssr_hf.__all__) == len(set(mssr_hf.__all__))
    for name in mssr_hf.__all__:
        assert hasattr(mssr_hf, name), name


def test_builtin_tasks_still_export_the_answer_extractors():
    from mssr_hf.tasks import builtin, extract

    for name in extract.__all__:
        assert getattr(builtin, name) is getattr(extract, name), name


def test_metrics_re_exports_scoring_and_cl_metrics():
    """``mssr_hf.metrics`` (public in DESIGN.md) holds nothing of its own: each of its names is its owner's."""
    from mssr_hf import cl_metrics, metrics, scoring

    owners = {name: module for module in (scoring, cl_metrics) for name in module.__all__}
    assert sorted(metrics.__all__) == sorted(owners)
    for name, module in owners.items():
        assert getattr(metrics, name) is getattr(module, name), name


def setup_requirements() -> tuple[set[str], dict[str, set[str]]]:
    """The distributions setup.py requires, and those of each extra (names normalised), read from its source."""
    tree = ast.parse((PACKAGE.parent / "setup.py").read_text())
    call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "setup")
    values = {
        k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg in ("install_requires", "extras_require")
    }

    def names(requirements):
        return {re.split(r"[<>=!~ \[]", r, maxsplit=1)[0].lower().replace("_", "-") for r in requirements}

    return names(values["install_requires"]), {k: names(v) for k, v in values["extras_require"].items()}


def imported_distributions() -> dict[str, set[str]]:
    """The distribution of every third-party module the package imports (anywhere), with the modules importing it."""
    providers = importlib.metadata.packages_distributions()
    found: dict[str, set[str]] = {}
    for name, path in module_files().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                tops = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                tops = [node.module.split(".")[0]]
            else:
                continue
            for top in tops:
                if top in sys.stdlib_module_names or top == "mssr_hf":
                    continue
                for distribution in providers.get(top, [top]):
                    found.setdefault(distribution.lower().replace("_", "-"), set()).add(name)
    return found


def test_dependencies_are_what_the_package_imports():
    """Every distribution install_requires names is imported, and every one imported is required or an extra's:
    matplotlib (and pillow, which it brings) by the plots only, tokenizers by the tiny test model (a transformers
    dependency)."""
    required, extras = setup_requirements()
    imported = imported_distributions()
    assert required <= set(imported), sorted(required - set(imported))
    optional = {
        "matplotlib": {"mssr_hf.plotting"},
        "pillow": {"mssr_hf.tracking"},
        "tokenizers": {"mssr_hf.tiny_model"},
    }
    for distribution, modules in imported.items():
        if distribution not in required:
            assert modules <= optional.get(distribution, set()), (distribution, modules)
    assert "matplotlib" in extras["plots"] and "tensorboard" in extras["tensorboard"] and "evaluate" not in required
    assert extras["qlora"] == {"bitsandbytes"}
