"""The project's structure, checked from the source so that it cannot regress: imports go one way
(cli -> deployments -> flows -> tasks -> {tdm, schemas}), the paper's benchmark (``benchmarks``)
uses the library and the pipeline and only the command line imports it, no import cycle between
modules (imports under ``TYPE_CHECKING`` count), and the library imports no pipeline package."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = {
    "tdm": 0,
    "schemas": 0,
    "tasks": 1,
    "flows": 2,
    "deployments": 3,
    "benchmarks": 4,
    "cli": 4,
}
#: The two top packages: the command line registers `tdm bench`, the benchmark's command uses the
#: command line's argument helpers.
TOP = {"cli", "benchmarks"}
PIPELINE_ONLY = ("prefect", "prefect_dask", "duckdb", "pandera", "great_expectations")


def _modules() -> dict[str, Path]:
    found = {}
    for package in LAYERS:
        for path in sorted((ROOT / package).rglob("*.py")):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """Every module name ``name`` imports, anywhere in the file (functions, TYPE_CHECKING)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join([*parts, base] if base else parts)
            out.add(base)
            out.update(f"{base}.{alias.name}" for alias in node.names)
    return out


def _project_module(imported: str) -> str | None:
    """The project module an import names (``tdm.imputer.TDMImputer`` -> ``tdm.imputer``)."""
    candidate = imported
    while candidate and candidate not in MODULES:
        candidate = candidate.rpartition(".")[0]
    return candidate or None


GRAPH = {
    name: {m for i in _imports(name, path) if (m := _project_module(i)) and m != name}
    for name, path in MODULES.items()
}


def test_the_layers_are_all_there() -> None:
    assert {name.split(".")[0] for name in MODULES} == set(LAYERS)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_imports_go_one_way(name: str) -> None:
    """A module imports only from its own package or from packages of a lower layer; the two
    bottom packages (tdm, schemas) import neither each other nor anything above."""
    top = name.split(".")[0]
    wrong = sorted(
        target
        for target in GRAPH[name]
        if (other := target.split(".")[0]) != top
        and (LAYERS[other] >= LAYERS[top] or LAYERS[top] == 0)
        and {top, other} != TOP
    )
    assert not wrong, f"{name} imports against the layers: {wrong}"


@pytest.mark.parametrize("name", sorted(m for m in MODULES if m.split(".")[0] == "tdm"))
def test_the_library_imports_no_pipeline_package(name: str) -> None:
    imported = {i.split(".")[0] for i in _imports(name, MODULES[name])}
    assert not imported & set(PIPELINE_ONLY), f"{name} imports {imported & set(PIPELINE_ONLY)}"


def test_no_import_cycle() -> None:
    """No strongly connected component of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(GRAPH[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    assert not cycles, f"import cycles: {cycles}"


def test_importing_the_library_loads_no_benchmark_module() -> None:
    """``import tdm`` loads the imputers, not the paper's evaluation (baselines, trials, data)."""
    code = "import sys, tdm; print(' '.join(m for m in sys.modules if m.startswith('benchmarks')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""
    assert not (ROOT / "tdm" / "baselines").exists()


def test_the_checks_see_type_only_function_level_and_relative_imports(tmp_path: Path) -> None:
    """The graph counts imports under TYPE_CHECKING, inside functions, and relative ones."""
    source = tmp_path / "artifacts.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from flows.steps import ImputeTableResult\n"
        "def publish():\n"
        "    from .impute import fit_model\n",
        encoding="utf-8",
    )
    found = _imports("tasks.artifacts", source)
    assert {"flows.steps.ImputeTableResult", "tasks.impute.fit_model"} <= found
    assert _project_module("flows.steps.ImputeTableResult") == "flows.steps"
    assert _project_module("numpy") is None
