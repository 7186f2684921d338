"""The generated files: the config schema and the tables of the docs, made from the registries.

Every file part here is written from one registry and never by hand: the JSON schema of a
config (``workflow/schemas/config.schema.yaml``, from the config models, the field registry and
the figure registry), the Conda environment of the rules (``workflow/envs/attnsvm.yaml``, from
``pyproject.toml``), the cell field table of ``config/README.md`` (from
:data:`attnsvm.config.fields.FIELDS`) and the table of tasks of ``docs/extending.md`` (from
:func:`attnsvm.tasks.tasks`). In a Markdown file the generated part stands between
``<!-- BEGIN GENERATED: <name> -->`` and ``<!-- END GENERATED: <name> -->``.

``attnsvm generate`` writes them; ``attnsvm generate --check`` (and a test) fails when one is
out of date, naming it.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from pathlib import Path

from attnsvm.config.cell import stub as cell_stub
from attnsvm.config.fields import FIELDS
from attnsvm.config.schema import schema_yaml
from attnsvm.report.figures import FIGURES

ROOT = Path(__file__).resolve().parents[1]


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|")


def field_table() -> str:
    """The cell field table of ``config/README.md``: name, default, allowed values, meaning."""
    lines = [
        "| field | default | allowed | meaning (docs/science.md section) | consumed by |",
        "|---|---|---|---|---|",
    ]
    for f in FIELDS:
        default = f.default
        if f.kind == "bool":
            default = str(default).lower()
        elif default is None:
            default = "null"
        elif f.kind == "choice":
            default = f"`{default}`"
        stages = ", ".join(f.stages) or f"unused: {f.unused}"
        lines.append(
            f"| `{f.name}` | {_cell(default)} | {_cell(f.allowed_text())} | {_cell(f.doc)} | "
            f"{stages} |"
        )
    return "\n".join(lines)


def task_table() -> str:
    """The table of tasks of ``docs/extending.md``: module, the SVMs its cells store, what."""
    from attnsvm.tasks import tasks  # imports every task module

    lines = ["| task module | what it runs |", "|---|---|"]
    for t in tasks():
        lines.append(f"| `attnsvm/tasks/{t.name}.py` | {_cell(t.doc)} |")
    return "\n".join(lines)


#: conda-forge's names of the packages whose PyPI name differs (or that conda splits)
CONDA_NAMES = {
    "torch": "pytorch",
    "cvxpy": "cvxpy-base",
    "matplotlib": "matplotlib-base",
    "netCDF4": "netcdf4",
}

CONDA_HEADER = """\
# Generated from pyproject.toml by `attnsvm generate` (attnsvm/generate.py); do not edit.
# Software of every rule, for `snakemake --sdm conda` where conda channels are reachable: the
# library's dependencies (the rules run its scripts; Snakemake itself runs outside). Without
# --sdm conda (the default, and the only option on machines without conda channels) the rules
# run in the active environment, into which the Quickstart installs attnsvm.
"""


def conda_env(pyproject: Path = ROOT / "pyproject.toml") -> str:
    """``workflow/envs/attnsvm.yaml``: Python and the dependencies of ``pyproject.toml``'s
    ``[project]`` under their conda-forge names (:data:`CONDA_NAMES`), then attnsvm itself
    from the checkout with pip."""
    project = tomllib.loads(pyproject.read_text())["project"]
    deps = [f"python{project['requires-python']}", "pip"]
    for requirement in project["dependencies"]:
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)\s*([<>=!~][^;\[]*)?", requirement.strip())
        if not m:  # extras or markers: no conda spelling to derive
            raise ValueError(f"pyproject.toml: {requirement!r}: give it a conda spelling here")
        name, spec = m.group(1), (m.group(2) or "").replace(" ", "")
        deps.append(CONDA_NAMES.get(name, name.lower()) + spec)
    lines = ["channels:", "  - conda-forge", "  - nodefaults", "dependencies:"]
    lines += [f"  - {d}" for d in deps]
    pip = "      - -e ../..  # attnsvm itself, from this checkout (conda holds its dependencies)"
    lines += ["  - pip:", pip]
    return CONDA_HEADER + "\n".join(lines) + "\n"


#: Markdown parts: (file, name) -> the function that makes the part.
PARTS: dict[tuple[str, str], Callable[[], str]] = {
    ("config/README.md", "fields"): field_table,
    ("docs/extending.md", "tasks"): task_table,
}
#: Whole files: path -> the function that makes it.
FILES: dict[str, Callable[[], str]] = {
    "workflow/schemas/config.schema.yaml": lambda: schema_yaml(FIGURES),
    "attnsvm/config/cell.pyi": cell_stub,
    "workflow/envs/attnsvm.yaml": conda_env,
}


def _replace_part(text: str, name: str, body: str, path: str) -> str:
    pattern = re.compile(
        rf"(<!-- BEGIN GENERATED: {name} -->\n).*?(<!-- END GENERATED: {name} -->)", re.S
    )
    if not pattern.search(text):
        raise ValueError(f"{path} has no generated part {name!r} (BEGIN / END GENERATED markers)")
    return pattern.sub(lambda m: m.group(1) + body + "\n" + m.group(2), text)


def expected(root: Path = ROOT) -> dict[str, str]:
    """Every generated file's text as it should be, by path relative to ``root``."""
    out = {path: make() for path, make in FILES.items()}
    for (path, name), make in PARTS.items():
        text = out.get(path) or (root / path).read_text()
        out[path] = _replace_part(text, name, make(), path)
    return out


def stale(root: Path = ROOT) -> list[str]:
    """The generated files that differ from what the registries make (paths)."""
    return [
        path
        for path, text in expected(root).items()
        if not (root / path).exists() or (root / path).read_text() != text
    ]


def write(root: Path = ROOT) -> list[str]:
    """Write every out-of-date generated file; returns their paths."""
    changed = stale(root)
    texts = expected(root)
    for path in changed:
        (root / path).write_text(texts[path])
    return changed
