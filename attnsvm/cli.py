"""Command line: ``attnsvm run-cell`` (one cell, no Snakemake) and ``attnsvm status``."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence

from attnsvm.cell import Cell, CellError


def _parse_bool(text: str) -> bool:
    if text.lower() in ("1", "true", "yes"):
        return True
    if text.lower() in ("0", "false", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true/false, got {text!r}")


def _add_cell_options(p: argparse.ArgumentParser) -> None:
    for f in dataclasses.fields(Cell):
        default = f.default
        kind = {int: int, float: float, bool: _parse_bool}.get(type(default), str)
        if f.name == "m":
            kind = int
        p.add_argument(f"--{f.name}", type=kind, default=default, help=f"(default {default})")


def build_parser() -> argparse.ArgumentParser:
    """The ``attnsvm`` argument parser."""
    parser = argparse.ArgumentParser(prog="attnsvm", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    rc = sub.add_parser("run-cell", help="train one cell, solve its SVMs, print a summary")
    _add_cell_options(rc)
    rc.add_argument("--device", default="auto", help="auto (CUDA when present), cpu or cuda")
    rc.add_argument("--json", action="store_true", help="print machine-readable JSON")
    cc = sub.add_parser("check-config", help="validate a sweep config file without running it")
    cc.add_argument("configfile", help="YAML config, e.g. config/paper.yaml")
    st = sub.add_parser("status", help="progress of sweeps under a results directory")
    st.add_argument(
        "path",
        nargs="?",
        default=None,
        help="results dir or experiment dir (default: the config's, or results)",
    )
    st.add_argument(
        "--configfile",
        default=None,
        help="the sweep's config: counts missing blocks and estimates time left",
    )
    st.add_argument("--json", action="store_true", help="print machine-readable JSON")
    st.add_argument(
        "--failed-paths",
        action="store_true",
        help="print the store paths of crashed blocks (to --forcerun them)",
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
        from attnsvm.grid import ConfigError
        from attnsvm.status import print_status

        try:
            return print_status(
                args.path,
                as_json=args.json,
                configfile=args.configfile,
                failed_paths=args.failed_paths,
            )
        except (ConfigError, OSError) as err:
            print(f"attnsvm status: error: {err}", file=sys.stderr)
            return 2
    return 2


def _check_config(path: str) -> int:
    """Parse and validate a config file; name the file, line and key of the first problem."""
    from attnsvm.config_io import load_config_file
    from attnsvm.grid import ConfigError, describe_cost
    from attnsvm.workflow_plan import Plan

    try:
        raw = load_config_file(path)
    except ConfigError as err:
        print(f"attnsvm: error: {err}", file=sys.stderr)
        return 2
    try:
        plan = Plan.from_config(raw)
    except ConfigError as err:
        print(f"attnsvm: error: {path}: {err}", file=sys.stderr)
        return 2
    for name, exp in plan.experiments.items():
        print(f"{name}: {describe_cost(exp)}, figures {', '.join(exp.figures) or '-'}")
    for warning in plan.cost_warnings(local=True, cores=None):
        print(f"attnsvm: warning: {warning}", file=sys.stderr)
    return 0


def _run_cell(args: argparse.Namespace) -> int:
    from attnsvm.cell import check_run_cost

    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(Cell)}
    try:
        cell = Cell(**values)
        warning = check_run_cost(cell)
    except CellError as err:
        print(f"attnsvm: error: {err}", file=sys.stderr)
        return 2
    from attnsvm.device import DeviceUnavailableError, resolve_device

    try:
        resolve_device(args.device)  # before any work: no GPU for --device cuda is one line
    except (ValueError, DeviceUnavailableError) as err:
        print(f"attnsvm: error: {err}", file=sys.stderr)
        return 2
    if warning:
        print(f"attnsvm: warning: {warning}", file=sys.stderr)
    from attnsvm.report_text import cell_summary, cell_summary_dict
    from attnsvm.run import run_cells

    (res,) = run_cells([cell], device=args.device)
    if args.json:
        print(json.dumps(cell_summary_dict(res), indent=2, default=float))
    else:
        print(cell_summary(res))
    return 0 if res.status == "ok" else 1


if __name__ == "__main__":
    raise SystemExit(main())
