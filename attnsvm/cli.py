"""The attnsvm command line: run-cell (one cell, no Snakemake), check-config, status, claims,
open, generate."""

from __future__ import annotations

import argparse
import difflib
import json
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from attnsvm.config.cell import Cell, CellError
from attnsvm.config.cost import check_run_cost
from attnsvm.config.errors import ConfigError
from attnsvm.config.fields import FIELDS, NAMES
from attnsvm.config.files import check_results_dir, load_config_file
from attnsvm.failures import DeviceUnavailableError
from attnsvm.provenance import ATTNSVM_VERSION
from attnsvm.sweep.environment import check_environment

DESCRIPTION = """\
Gradient descent on one-layer attention against the attention SVMs (docs/science.md).
The sweep itself runs with Snakemake (see the README); these commands run one cell, check a
sweep config, show the progress of a sweep, test the theory's claims against it and outline
its results."""


def _bool_text(text: str) -> bool:
    if text.lower() in ("1", "true", "yes"):
        return True
    if text.lower() in ("0", "false", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true/false, got {text!r}")


#: the argparse type of each kind of field (attnsvm.config.fields.KINDS)
_KIND_TYPES = {"choice": str, "int": int, "optional int": int, "real": float, "bool": _bool_text}


def _add_cell_options(p: argparse.ArgumentParser) -> None:
    """One dashed option per cell field: type, choices and help from the field registry
    (:data:`attnsvm.config.fields.FIELDS`)."""
    group = p.add_argument_group("cell fields (docs/science.md; config/README.md)")
    for f in FIELDS:
        flag = "--" + f.name.replace("_", "-")
        shown = "m = d" if f.kind == "optional int" else f.default
        help_text = f"{f.doc} (default: {shown})".replace("%", "%%")
        kind = _KIND_TYPES[f.kind]
        choices = f.choices or None
        if f.kind == "bool":
            group.add_argument(
                flag, action=argparse.BooleanOptionalAction, default=f.default, help=help_text
            )
        else:
            group.add_argument(
                flag,
                dest=f.name,
                type=kind,
                default=f.default,
                choices=choices,
                metavar=f.name.upper() if choices is None else None,
                help=help_text,
            )
        if "_" in f.name:  # the old underscore spelling, accepted but not shown
            group.add_argument(
                "--" + f.name, dest=f.name, type=kind, choices=choices, help=argparse.SUPPRESS
            )


def _add_configfile(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--configfile",
        default=None,
        help="the sweep's config (default: config/config.yaml when present, as for Snakemake)",
    )


def _version() -> str:
    return f"attnsvm {ATTNSVM_VERSION}"


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: a positive whole number")
    return value


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
    rc.add_argument(
        "--threads",
        type=_positive_int,
        default=None,
        help="cores for every thread pool (BLAS, OpenMP, torch); default: the cores this "
        "process was given (SLURM_CPUS_PER_TASK, else its CPU affinity)",
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
    _add_configfile(st)
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
    cl = sub.add_parser(
        "claims",
        help="the theory's claims against a finished sweep: verdicts and evidence",
        description="Evaluate every claim of the config's experiments on their sweep stores "
        "and print verdict, evidence and control row per claim (docs/claims.md), then the "
        "family-wise gate. Exit status 0 when the gate passes, 1 when a FAIL holds "
        "family-wise (Holm over every claim; with --strict: also when a claim is "
        "INCONCLUSIVE), 2 on a bad config or option, 3 when a sweep store is missing, "
        "damaged or not computed from this config's cells (its claims are not evaluated). "
        "--calibrate: the coverage of every interval the ledger decides with, measured "
        "instead (exit 1 if one is below its nominal level minus 0.01).",
    )
    _add_configfile(cl)
    cl.add_argument("--json", action="store_true", help="print the ledger entries as JSON")
    cl.add_argument(
        "--strict", action="store_true", help="exit 1 also when a claim is INCONCLUSIVE"
    )
    cl.add_argument(
        "--calibrate",
        action="store_true",
        help="measure the coverage of every (method, number of values, level) the config's "
        "ledger decides at (of its run's stores when they are there, else at its seeds)",
    )
    cl.add_argument(
        "--write",
        action="store_true",
        help="with --calibrate: regenerate the stored calibration table of the mean "
        "(attnsvm/claims/calibration.json; long)",
    )
    gen = sub.add_parser(
        "generate",
        help="write the files generated from the registries (schema, docs tables)",
        description="Write the config schema and the docs tables generated from the field, "
        "figure and task registries (attnsvm.generate); --check only reports stale files.",
    )
    gen.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 and name every generated file that is out of date",
    )
    op = sub.add_parser(
        "open",
        help="outline a run's results: experiments, stores, claims, provenance",
        description="Open every experiment of a results directory as one xarray.DataTree "
        "(attnsvm.open_results, for notebooks) and print its outline.",
    )
    op.add_argument(
        "results", nargs="?", default="results", help="results directory (default: results)"
    )
    return parser


#: exit statuses of a command stopped by a signal, as a shell reports them (128 + signal)
EXIT_SIGINT = 128 + signal.SIGINT
EXIT_SIGPIPE = 128 + signal.SIGPIPE


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``attnsvm`` console script.

    Every command survives a closed pipe (``attnsvm check-config config/paper.yaml | head
    -2``) and Ctrl-C without a traceback: a reader that went away ends the command quietly
    with status 141, Ctrl-C with one line on stderr and status 130 (128 + the signal, as a
    shell reports a process that the signal ended).
    """
    try:
        code = _dispatch(argv)
        sys.stdout.flush()  # here, not at exit: a closed pipe is then caught below
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_SIGPIPE
    except KeyboardInterrupt:
        _silence_stdout()
        print("attnsvm: interrupted", file=sys.stderr)
        return EXIT_SIGINT
    return code


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that flushing what is left of it at exit (to a pipe that
    is closed) raises nothing (the Python docs' recipe for SIGPIPE)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no file descriptor behind sys.stdout (a test's capture)
        pass


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line, parsed; an unknown option is refused by its subcommand, with the
    closest of that subcommand's options (``--dd`` -> ``did you mean --d?``)."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[
            args.command
        ]
        options = [o for a in sub._actions for o in a.option_strings if o.startswith("--")]
        unknown = [e for e in extra if e.startswith("-")] or extra
        close = difflib.get_close_matches(unknown[0].split("=")[0], options, n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        sub.error(f"unrecognized arguments: {' '.join(extra)}{hint}")
    return args


def _dispatch(argv: Sequence[str] | None) -> int:
    args = _parse(argv)
    if args.command == "run-cell":
        return _run_cell(args)
    if args.command == "check-config":
        return _check_config(args.configfile)
    if args.command == "status":
        return _status(args)
    if args.command == "generate":
        return _generate(args.check)
    if args.command == "claims":
        return _claims(args)
    if args.command == "open":
        return _open(args.results)
    return 2


def _generate(check: bool) -> int:
    from attnsvm import generate  # the registries of every package

    if check:
        stale = generate.stale()
        for path in stale:
            print(f"attnsvm generate: {path} is out of date (run: attnsvm generate)")
        return 1 if stale else 0
    for path in generate.write():
        print(f"wrote {path}")
    return 0


def _open(results: str) -> int:
    # xarray, pandas and zarr: this command only
    from attnsvm.results import ResultsError, open_results, outline
    from attnsvm.sweep.integrity import StoreError

    try:
        print(outline(open_results(results)))
    except BrokenPipeError:
        raise  # a closed stdout, not a problem of the results (main)
    except (ResultsError, StoreError, OSError) as err:
        return _error(str(err))
    return 0


def _error(message: str) -> int:
    print(f"attnsvm: error: {message}", file=sys.stderr)
    return 2


def _status(args: argparse.Namespace) -> int:
    from attnsvm.status import print_status  # numpy and the store checks: this command only

    try:
        return print_status(
            args.path,
            as_json=args.json,
            configfile=args.configfile,
            failed_paths=args.failed_paths,
            verify=args.verify,
        )
    except BrokenPipeError:
        raise  # a closed stdout, not a problem of the results (main)
    except (ConfigError, OSError) as err:
        print(f"attnsvm status: error: {err}", file=sys.stderr)
        return 2


def _claims(args: argparse.Namespace) -> int:
    """Evaluate the config's claims on its sweep stores and print them (docs/claims.md)."""
    # the store checks, xarray and scipy: this command only
    from attnsvm.claims import ledger as L
    from attnsvm.plan import Plan
    from attnsvm.status import default_configfile
    from attnsvm.sweep.integrity import StoreError

    path = args.configfile or default_configfile()
    if path is None:
        return _error("no config/config.yaml here: name the sweep's config with --configfile")
    if args.write and not args.calibrate:
        return _error("--write goes with --calibrate")
    try:
        plan = Plan.from_config(load_config_file(path))
    except ConfigError as err:
        return _error(f"{path}: {err}")
    entries, unread, planned, matched = [], [], 0, 0
    for name, exp in plan.experiments.items():
        if not exp.claims:
            continue
        sweep = plan.paths.sweep(name)
        digests = plan.block_digests(name)
        planned += len(digests)
        try:
            found = L.blocks_of_plan(sweep, digests) if Path(sweep).exists() else 0
            matched += found
            if found < len(digests):
                why = ("does not exist: run the sweep first" if not Path(sweep).exists() else
                       f"was not computed from this config's cells ({found} of {len(digests)} "
                       "blocks)")  # fmt: skip
                raise StoreError(sweep, why, "foreign")
            entries += L.evaluate_store(sweep, exp.claims, name)
        except (StoreError, OSError, ValueError) as err:
            why = err.args[1] if isinstance(err, StoreError) and len(err.args) > 1 else str(err)
            unread.append(f"experiment {name}: {len(exp.claims)} claim(s) not evaluated: "
                          f"the sweep store {sweep} {why}")  # fmt: skip
    if args.calibrate:
        return _calibrate(plan, entries if not unread else None, args)
    if planned and not entries:
        print(f"attnsvm claims: {path} has not been run in {plan.results}/: {matched} of "
              f"{planned} blocks of its experiments with claims", file=sys.stderr)  # fmt: skip
        return 3
    gate = L.holm_gate(entries)
    if args.json:
        print(json.dumps({"claims": entries, "gate": gate}, indent=1))
    else:
        print(L.text_table(entries))
        c = L.counts(entries)
        print(f"{c['PASS']} PASS, {c['FAIL']} FAIL, {c['INCONCLUSIVE']} INCONCLUSIVE "
              f"of {len(entries)} claim(s) ({path})")  # fmt: skip
        for line in L.summary_lines(entries):
            print(line)
        print(L.gate_text(gate))
    for line in unread:
        print(f"attnsvm claims: {line}", file=sys.stderr)
    if not gate["passes"] or (args.strict and L.counts(entries)["INCONCLUSIVE"]):
        return 1
    return 3 if unread else 0


def _calibrate(plan, entries: list[dict] | None, args: argparse.Namespace) -> int:
    """``attnsvm claims --calibrate``: the coverage of every (method, number of values, level)
    the ledger decides at (module attnsvm.claims.calibration)."""
    # scipy and the claims' evaluation: this option only
    from attnsvm.claims import calibration as C
    from attnsvm.claims.design import decided_bases

    if args.write:
        doc = C.build_table(progress=lambda line: print(line, file=sys.stderr, flush=True))
        print(f"wrote {C.write_table(doc)}", file=sys.stderr)
    if entries is not None:
        source = "the decided rows of the run's ledger"
        bases = [b for e in entries for r in (*e["rows"], e.get("control") or {"rows": []})
                 if r.get("verdict") in ("PASS", "FAIL") for b in r.get("basis", [])]  # fmt: skip
    else:
        source = "the config's seeds (no complete run of it: ideal outcomes)"
        bases = [b for name, exp in plan.experiments.items() for claim in exp.claims
                 for b in decided_bases(claim, exp.axes, len(exp.seeds))]  # fmt: skip
    cases = sorted({C.Case.of(b) for b in bases}, key=lambda c: (c.method, c.level, c.n))
    results = [C.check_case(c) for c in cases]
    composite = C.composite_cases()
    ok = all(r["ok"] for r in results) and all(r["ok"] for r in composite)
    if args.json:
        doc = {"source": source, "ok": ok, "cases": results, "composite": composite,
               "table": C.table.load()["methods"]}  # fmt: skip
        print(json.dumps(doc, indent=1))
    else:
        print(f"calibration of the intervals the ledger decides with ({source}):")
        for r in results:
            print("  " + C.case_text(r))
        print("built intervals on data whose seeds are shared by 4 points:")
        for r in composite:
            print("  " + C.case_text(r))
        print("the stored calibration table (attnsvm/claims/calibration.json):")
        for line in C.table_summary():
            print("  " + line)
        print(f"{sum(r['ok'] for r in results)} of {len(results)} case(s) calibrated"
              + ("" if ok else "; some are not: their verdicts are not to be trusted"))  # fmt: skip
    return 0 if ok else 1


def _check_config(path: str) -> int:
    """Parse and validate a config file; name the file, line and key of the first problem."""
    # pydantic, the config models and the registries: this command only
    from attnsvm.config.cost import format_cpu_time
    from attnsvm.config.grid import describe_cost
    from attnsvm.plan import Plan

    try:
        check_environment()  # the ATTNSVM_* variables, as the workflow checks them
        raw = load_config_file(path)
    except ConfigError as err:
        return _error(str(err))
    try:
        plan = Plan.from_config(raw)
        check_results_dir(plan.results)
    except ConfigError as err:
        return _error(f"{path}: {err}")
    for name, exp in plan.experiments.items():
        print(f"{name}: {describe_cost(exp)}, figures {', '.join(exp.figures) or '-'}")
    _claims_design(plan)
    exps = plan.experiments.values()
    cells, blocks = sum(e.n_cells for e in exps), sum(e.n_blocks for e in exps)
    print(
        f"total: {len(plan.experiments)} experiments, {cells:,} cells in {blocks:,} blocks, "
        f"~{format_cpu_time(plan.estimated_seconds())} predicted; results in {plan.results}/"
    )
    for warning in plan.cost_warnings(local=True, cores=None):
        print(f"attnsvm: warning: {warning}", file=sys.stderr)
    print(f"OK: {path} is a valid config")
    return 0


def _claims_design(plan) -> None:
    """One line per claim: whether its configured seeds can decide it (PASS and FAIL on
    ideal outcomes) and the seeds that would (attnsvm.claims.design); a warning naming the
    claims they cannot."""
    # scipy and the claims' evaluation: check-config only
    from attnsvm.claims.design import by_design, decidability, design_text
    from attnsvm.claims.spec import select_points

    undecided = []
    for name, exp in plan.experiments.items():
        for claim in exp.claims:
            d = decidability(claim, exp.axes, len(exp.seeds))
            cells = len(select_points(exp.axes, claim.where)) * len(exp.seeds)
            print(f"  claim {design_text(f'{name}/{claim.name}', d, cells, claim.given)}")
            if by_design(d):
                undecided.append(f"{name}/{claim.name}")
    if undecided:
        print(f"attnsvm: warning: {len(undecided)} claim(s) cannot be decided by their "
              f"configured seeds (INCONCLUSIVE by design): {', '.join(undecided)}",
              file=sys.stderr)  # fmt: skip


def _run_cell(args: argparse.Namespace) -> int:
    values = {name: getattr(args, name) for name in NAMES}
    try:
        check_environment()
        cell = Cell(**values)
        warning = check_run_cost(cell)
    except (CellError, ConfigError) as err:
        return _error(str(err))
    from attnsvm.gd.device import resolve_device  # torch: this command only

    try:  # before any work: an unusable device is one error, not a failed cell
        resolve_device(args.device)
    except (ValueError, DeviceUnavailableError) as err:
        return _error(str(err))
    if warning:
        print(f"attnsvm: warning: {warning}", file=sys.stderr)
    # xarray, scipy and the solvers: this command only
    from attnsvm.report.text import cell_summary, cell_summary_dict
    from attnsvm.tasks import run_cells

    (res,) = run_cells([cell], device=args.device, progress=args.progress, threads=args.threads)
    if args.json:
        print(json.dumps(cell_summary_dict(res), indent=2, default=float))
    else:
        print(cell_summary(res))
    return 0 if res.status == "ok" else 1


if __name__ == "__main__":
    raise SystemExit(main())
