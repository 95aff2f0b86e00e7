"""The words that describe the code stay true: every helpers module sits in the layer table of
``docs/architecture.md``, every command of ``./workbook`` is in the README, every command a
message or a doc tells the user to run exists, every repository file and ``helpers`` name the
docs and notebooks give in backticks exists, and every setting they show (``local.jit: lean``) is
a parameter that takes the value shown."""

from __future__ import annotations

import ast
import importlib
import json
import re
import typing
from pathlib import Path
from typing import Annotated

import yaml
from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo

from helpers.cli import build_parser
from helpers.params import WorkbookParams, project_root

ROOT = project_root()
HELPERS = ROOT / "helpers"


def _doc_files() -> list[Path]:
    """The README, ``docs/*.md`` and ``bench/*.md``: the prose the user reads."""
    return [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "bench").glob("*.md")]


def _section(text: str, title: str) -> str:
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else len(text)]


def _layer_rows() -> list[str]:
    table = _section((ROOT / "docs" / "architecture.md").read_text(encoding="utf-8"), "Layer map")
    return [line for line in table.splitlines() if line.startswith("| ") and "`" in line]


def _launcher_commands() -> set[str]:
    """The sub-commands the ``./workbook`` script dispatches (its ``case`` branches)."""
    script = (ROOT / "workbook").read_text(encoding="utf-8")
    body = script.split('case "$cmd" in', 1)[1].split("\nesac", 1)[0]
    names = re.findall(r"^  ([a-z|-]+)\)", body, flags=re.M)
    return {n for name in names for n in name.split("|")} - {"help", "-h", "--help"}


def test_every_helpers_module_is_in_the_layer_table() -> None:
    rows = _layer_rows()
    missing = []
    for module in sorted(HELPERS.rglob("*.py")):
        parts = module.relative_to(HELPERS).with_suffix("").parts
        if parts[-1] == "__init__" or parts[0].startswith("_"):
            continue
        if len(parts) == 1:  # a top-level module: named in some row
            found = any(f"`{parts[0]}`" in row for row in rows)
        else:  # helpers/pkg/module.py, or a sub-package (named as pkg/.../sub/ in pkg's row)
            row = next((r for r in rows if f"`{parts[0]}/`" in r), "")
            found = f"`{parts[1]}`" in row if len(parts) == 2 else f"`{parts[1]}/`" in row
        if not found:
            missing.append("/".join(parts))
    assert not missing, f"docs/architecture.md's layer table misses {missing}"


def _defined_names() -> set[str]:
    """The modules, folders and top-level functions and classes of helpers/."""
    names = {m.stem for m in HELPERS.rglob("*.py")} | {p.name for p in HELPERS.rglob("*") if p.is_dir()}
    for module in HELPERS.rglob("*.py"):
        tree = ast.parse(module.read_text(encoding="utf-8"))
        names |= {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)}
    return names


def test_every_layer_table_module_exists() -> None:
    """No row names a module that is gone (or a function or class that is)."""
    names = _defined_names()
    named = {n.rstrip("/") for row in _layer_rows() for n in re.findall(r"`([a-z_]+/?)`", row)}
    assert named <= names, f"the layer table names what helpers/ does not hold: {sorted(named - names)}"


def test_every_command_is_in_the_readme_and_the_cli() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    launcher = _launcher_commands()
    parser = build_parser()
    cli = set(parser._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    assert cli <= launcher, f"./workbook does not dispatch {sorted(cli - launcher)}"
    missing = sorted(c for c in launcher if f"./workbook {c}" not in readme)
    assert not missing, f"README.md never shows ./workbook {missing}"


def test_every_command_a_message_or_doc_names_exists() -> None:
    """A message that tells the user to run ``./workbook X`` names a real command, and none names
    ``workbook-stack`` (a console script the project never had)."""
    launcher = _launcher_commands()
    texts = [*HELPERS.rglob("*.py"), *_doc_files()]
    wrong = []
    for path in texts:
        text = path.read_text(encoding="utf-8")
        if "workbook-stack" in text:
            wrong.append(f"{path.relative_to(ROOT)}: workbook-stack")
        for name in re.findall(r"\./workbook ([a-z][a-z-]*)", text):
            if name not in launcher:
                wrong.append(f"{path.relative_to(ROOT)}: ./workbook {name}")
    assert not wrong, wrong


def _docs_and_notebooks() -> list[tuple[str, str]]:
    """(name, text) of :func:`_doc_files` and of the notebooks' cells."""
    out = [(str(p.relative_to(ROOT)), p.read_text(encoding="utf-8")) for p in _doc_files()]
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
        out.append((str(nb.relative_to(ROOT)), "\n".join("".join(c["source"]) for c in cells)))
    return out


#: Paths a doc may name that a fresh clone does not hold: what runs make, git-ignored.
_MADE_BY_RUNS = (".cache/", ".jars/", ".state/", ".venv/", "runs/", "lake/", "s3:")


def test_every_repository_file_a_doc_names_exists() -> None:
    """A file of the repository named in backticks (``helpers/x.py``, ``params/base.yaml``) exists:
    a moved or deleted file leaves no doc pointing at nothing."""
    suffixes = r"py|yaml|sh|tsv|md|ipynb|sql|json|toml|cfg"
    wrong = []
    for name, text in _docs_and_notebooks():
        for path in re.findall(rf"`([\w./-]+/[\w.-]+\.(?:{suffixes}))(?::\w+)?`", text):
            if path.startswith(("/", *_MADE_BY_RUNS)) or (ROOT / path).exists():
                continue
            wrong.append(f"{name}: {path}")
    assert not wrong, wrong


def test_every_helpers_name_a_doc_gives_resolves() -> None:
    """A dotted name in backticks (``helpers.silver.ingest.ingest_table``) is a module of the
    package or an attribute of one: a renamed function leaves no doc naming the old one."""
    wrong = []
    for name, text in _docs_and_notebooks():
        for dotted in sorted(set(re.findall(r"`(helpers(?:\.\w+)+)[`(]", text))):
            parts = dotted.split(".")
            for cut in range(len(parts), 0, -1):
                try:
                    found: object = importlib.import_module(".".join(parts[:cut]))
                except ImportError:
                    continue
                for attr in parts[cut:]:
                    found = getattr(found, attr, None)
                if found is None:
                    wrong.append(f"{name}: {dotted}")
                break
    assert not wrong, wrong


def _model_of(annotation: object) -> type[BaseModel] | None:
    """The parameters model a field holds (through ``X | None`` and the like), or None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        if (model := _model_of(arg)) is not None:
            return model
    return None


def _setting_field(key: str) -> FieldInfo | None:
    """The field of :class:`helpers.params.WorkbookParams` a dotted key names (``sources.<name>.``
    keys go through the map to :class:`helpers.params.SourceParams`), or None."""
    model: type[BaseModel] | None = WorkbookParams
    parts = key.split(".")
    found = None
    while parts and model is not None:
        key_part = parts.pop(0)  # a field's name or its YAML alias (a source's ``schema``)
        fields = model.model_fields
        found = fields.get(key_part) or next((f for f in fields.values() if f.alias == key_part), None)
        if found is None:
            return None
        if typing.get_origin(found.annotation) is dict and parts:
            parts.pop(0)  # the map's key (a source's name)
            args = typing.get_args(found.annotation)
        else:
            args = (found.annotation,)
        model = _model_of(args[-1])
    return found if not parts else None


def test_every_setting_a_doc_shows_is_a_parameter_with_a_valid_value() -> None:
    """A setting shown as ``section.key: value`` in backticks (``local.jit: lean``) is a parameter
    of the workbook, and the value is one the parameter takes: a renamed setting, or a value
    the parameter no longer accepts, leaves no doc telling the user to set it. (Only the field's
    own type is checked, not rules across fields.)"""
    sections = {n for n, f in WorkbookParams.model_fields.items() if _model_of(f.annotation)}
    wrong = []
    for name, text in _docs_and_notebooks():
        for key, value in sorted(set(re.findall(r"`([a-z_]+(?:\.[a-z_0-9]+)+): ([^`]+)`", text))):
            if key.split(".")[0] not in sections:
                continue  # not the workbook's (a schema's ``connect.name``)
            found = _setting_field(key)
            if found is None:
                wrong.append(f"{name}: {key} is no parameter")
                continue
            if "<" in value:
                continue  # a placeholder (``spark://127.0.0.1:<local.spark.port>``)
            kind = Annotated[found.annotation, *found.metadata] if found.metadata else found.annotation
            try:
                TypeAdapter(kind).validate_python(yaml.safe_load(value))
            except ValidationError as err:
                wrong.append(f"{name}: {key}: {value} ({err.errors()[0]['msg']})")
    assert not wrong, wrong
