"""Command line of attnsvm: run-cell (one cell, no Snakemake), check-config and status."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence

from attnsvm.config.cell import CHOICES, FIELD_DOCS, Cell, CellError

DESCRIPTION = """\
Gradient descent on one-layer attention against the attention SVMs (docs/science.md).
The sweep itself runs with Snakemake (see the README); these commands run one cell, check a
sweep config and show the progress of a sweep."""


def _bool_text(text: str) -> bool:
    if text.lower() in ("1", "true", "yes"):
        return True
    if text.lower() in ("0", "false", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true/false, got {text!r}")


def _add_cell_options(p: argparse.ArgumentParser) -> None:
    """One dashed option per :class:`Cell` field: type, choices and help from the field."""
    group = p.add_argument_group("cell fields (docs/science.md; config/README.md)")
    for f in dataclasses.fields(Cell):
        default = f.default
        flag = "--" + f.name.replace("_", "-")
        help_text = f"{FIELD_DOCS[f.name]} (default: {'m = d' if f.name == 'm' else default})"
        if isinstance(default, bool):
            group.add_argument(
                flag, action=argparse.BooleanOptionalAction, default=default, help=help_text
            )
            kind = _bool_text
        else:
            kind = int if f.name == "m" else {int: int, float: float}.get(type(default), str)
            group.add_argument(
                flag,
                dest=f.name,
                type=kind,
                default=default,
                choices=CHOICES.get(f.name),
                metavar=f.name.upper() if f.name not in CHOICES else None,
                help=help_text,
            )
        if "_" in f.name:  # the old underscore spelling, accepted but not shown
            group.add_argument(
                "--" + f.name, dest=f.name, type=kind, choices=CHOICES.get(f.name),
                help=argparse.SUPPRESS,
            )  # fmt: skip


def _version() -> str:
    from attnsvm import __version__

    return f"attnsvm {__version__}"


def build_parser() -> argparse.ArgumentParser:
    """The ``attnsvm`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="attnsvm",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    rc = sub.add_parser(
        "run-cell",
        help="train one cell, solve its SVMs, print a summary",
        description="Train one cell, solve its SVMs and print a one-screen summary "
        "(or JSON). Exit status 0 if the cell is ok, 1 if not, 2 on bad options.",
    )
    _add_cell_options(rc)
    rc.add_argument(
        "--device",
        default="auto",
        help="auto (CUDA when present, else CPU), cpu, cuda or cuda:N (default: auto)",
    )
    rc.add_argument("--json", action="store_true", help="print machine-readable JSON")
    rc.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="progress bars on stderr (default: on)",
    )
    cc = sub.add_parser(
        "check-config",
        help="validate a sweep config file without running it",
        description="Validate a sweep config; name the line of a YAML error or the key of a "
        "bad value, then list the cells and blocks of each experiment.",
    )
    cc.add_argument("configfile", help="YAML config, e.g. config/paper.yaml")
    st = sub.add_parser(
        "status",
        help="progress of a sweep: blocks, cells and the time left",
        description="Blocks done / running / missing per experiment, cells by status and the "
        "remaining wall time estimated from the measured jobs, while a sweep runs or after.",
    )
    st.add_argument(
        "path",
        nargs="?",
        default=None,
        help="results dir or experiment dir (default: the config's results dir)",
    )
    st.add_argument(
        "--configfile",
        default=None,
        help="the sweep's config (default: config/config.yaml when present, as for Snakemake)",
    )
    st.add_argument("--json", action="store_true", help="print machine-readable JSON")
    st.add_argument(
        "--failed-paths",
        action="store_true",
        help="print the store paths of crashed blocks (to --forcerun them)",
    )
    st.add_argument("--failed_paths", action="store_true", help=argparse.SUPPRESS)
    st.add_argument(
        "--verify",
        action="store_true",
        help="check every file of every block store against its manifest (slower); by "
        "default only the manifests are read, and the results of that are cached",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``attnsvm`` console script."""
    args = build_parser().parse_args(argv)
    if args.command == "run-cell":
        return _run_cell(args)
    if args.command == "check-config":
        return _check_config(args.configfile)
    if args.command == "status":
        return _status(args)
    return 2


def _error(message: str) -> int:
    print(f"attnsvm: error: {message}", file=sys.stderr)
    return 2


def _status(args: argparse.Namespace) -> int:
    from attnsvm.config.grid import ConfigError
    from attnsvm.sweep.status import print_status

    try:
        return print_status(
            args.path,
            as_json=args.json,
            configfile=args.configfile,
            failed_paths=args.failed_paths,
            verify=args.verify,
        )
    except (ConfigError, OSError) as err:
        print(f"attnsvm status: error: {err}", file=sys.stderr)
        return 2


def _check_config(path: str) -> int:
    """Parse and validate a config file; name the file, line and key of the first problem."""
    from attnsvm.config.files import load_config_file
    from attnsvm.config.grid import ConfigError, describe_cost
    from attnsvm.sweep.plan import Plan

    try:
        raw = load_config_file(path)
    except ConfigError as err:
        return _error(str(err))
    try:
        plan = Plan.from_config(raw)
    except ConfigError as err:
        return _error(f"{path}: {err}")
    for name, exp in plan.experiments.items():
        print(f"{name}: {describe_cost(exp)}, figures {', '.join(exp.figures) or '-'}")
    for warning in plan.cost_warnings(local=True, cores=None):
        print(f"attnsvm: warning: {warning}", file=sys.stderr)
    return 0


def _run_cell(args: argparse.Namespace) -> int:
    from attnsvm.config.cell import check_run_cost

    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(Cell)}
    try:
        cell = Cell(**values)
        warning = check_run_cost(cell)
    except CellError as err:
        return _error(str(err))
    from attnsvm.gd.device import DeviceUnavailableError, resolve_device

    try:  # before any work: an unusable device is one error, not a failed cell
        resolve_device(args.device)
    except (ValueError, DeviceUnavailableError) as err:
        return _error(str(err))
    if warning:
        print(f"attnsvm: warning: {warning}", file=sys.stderr)
    from attnsvm.report.text import cell_summary, cell_summary_dict
    from attnsvm.sweep.compute import run_cells

    (res,) = run_cells([cell], device=args.device, progress=args.progress)
    if args.json:
        print(json.dumps(cell_summary_dict(res), indent=2, default=float))
    else:
        print(cell_summary(res))
    return 0 if res.status == "ok" else 1


if __name__ == "__main__":
    raise SystemExit(main())
