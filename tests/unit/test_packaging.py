"""Packaging invariants: conda and pip environments agree; notebooks are committed clean."""

from __future__ import annotations

import json
import re
import tomllib

import yaml

from helpers.params import project_root

ROOT = project_root()


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _split(requirement: str) -> tuple[str, str]:
    m = re.match(r"^([A-Za-z0-9_.\-]+)(\[[^\]]*\])?\s*(.*)$", requirement.strip())
    assert m, requirement
    return _norm(m.group(1)), m.group(3).replace(" ", "")


def test_environment_yml_matches_pyproject() -> None:
    """Every pip requirement (runtime and dev) appears in environment.yml with the same range."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = dict(_split(r) for r in [*project["dependencies"], *project["optional-dependencies"]["dev"]])
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    have: dict[str, str] = {}
    for dep in env["dependencies"]:
        items = dep["pip"] if isinstance(dep, dict) else [dep]
        for item in items:
            if item.startswith("-e"):
                continue
            name, spec = _split(item)
            have.setdefault(name, spec)
    missing = {n: s for n, s in wanted.items() if have.get(n) != s}
    assert not missing, f"environment.yml lacks or differs for: {missing}"


def test_committed_notebooks_carry_no_outputs() -> None:
    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    assert notebooks, "no notebooks found"
    for path in notebooks:
        nb = json.loads(path.read_text())
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                assert cell.get("outputs") == [], f"{path.name} has outputs: strip them (nbstripout)"
                assert cell.get("execution_count") is None, f"{path.name} has execution counts"


def test_notebooks_follow_the_skeleton() -> None:
    """Standard python3 kernel, one 'parameters' cell with env, no magics or shell escapes."""
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        assert re.match(r"^\d\d_[a-z0-9_]+\.ipynb$", path.name), path.name
        nb = json.loads(path.read_text())
        assert nb["metadata"]["kernelspec"]["name"] == "python3", path.name
        tagged = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
        assert len(tagged) == 1, f"{path.name}: exactly one cell tagged 'parameters'"
        source = "".join(tagged[0]["source"])
        assert re.search(r'^env: str = "local"', source, re.M), f"{path.name}: parameters lack env"
        for cell in nb["cells"]:
            if cell["cell_type"] != "code":
                continue
            for line in "".join(cell["source"]).splitlines():
                assert not line.lstrip().startswith(("%", "!")), f"{path.name}: magic/shell line {line!r}"
