"""What a running workflow tells its console: one status line a minute, one line at the end.

The default profile keeps Snakemake's console to progress and failures (no per-job
boilerplate); the workflow adds (``workflow/rules/common.smk``)

- :func:`start_status_lines`: while the run goes on, one line a minute, the overall line of
  ``attnsvm status`` (blocks done, running, missing, and the time left: :mod:`attnsvm.status`);
- :func:`verdict_line`: when the run ends, ``N PASS, M FAIL, K INCONCLUSIVE; report: ...``,
  counted from the claims ledgers it wrote (:mod:`attnsvm.claims.ledger`).
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from pathlib import Path

from attnsvm.claims.ledger import counts, read_ledger
from attnsvm.claims.stats import VERDICTS
from attnsvm.sweep.integrity import StoreError

#: seconds between two status lines
STATUS_INTERVAL = 60.0

#: the report the README's Quickstart builds, under the results directory
REPORT_NAME = "report.html"

#: held while a line is printed; once the last line is out (:func:`print_last`), ``_CLOSED``
#: is set and the status thread prints nothing more (a daemon thread still runs during the
#: interpreter's atexit handlers, so without it a status line could follow the verdicts)
_PRINTING = threading.Lock()
_CLOSED = threading.Event()


def status_line(results: str | os.PathLike, configfile: str | os.PathLike) -> str:
    """``attnsvm: blocks done 12 of 26, running 2, missing 12; remaining ~3 min``."""
    from attnsvm.status import _fmt_seconds, sweep_status  # planning: only once a line is due

    _, _, overall = sweep_status(results, configfile)
    if overall is None:
        return "attnsvm: no block planned yet"
    left = overall["estimated_remaining_seconds"]
    if left:
        rest = f"remaining ~{_fmt_seconds(left)}"
    elif overall["blocks_missing"] or overall["blocks_running"]:
        rest = "estimating the time left"
    else:
        rest = "every block done; summaries, figures and claims under way"
    return (
        f"attnsvm: blocks done {overall['blocks_done']} of {overall['blocks_planned']}, "
        f"running {overall['blocks_running']}, missing {overall['blocks_missing']}; {rest}"
    )


def start_status_lines(
    results: str | os.PathLike,
    configfile: str | os.PathLike | None,
    interval: float = STATUS_INTERVAL,
) -> threading.Event | None:
    """Print :func:`status_line` to stderr every ``interval`` seconds from a daemon thread
    (it ends with the process); returns the event that stops it, or None without a config
    file to plan from. A status that cannot be computed prints one warning and stops the
    lines, never the run."""
    if configfile is None:
        return None
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(interval):
            try:
                line = status_line(results, configfile)
            except Exception as err:  # the run goes on; the lines stop, saying why
                print(f"attnsvm: warning: no more status lines: {err}", file=sys.stderr)
                return
            with _PRINTING:
                if stop.is_set() or _CLOSED.is_set():
                    return
                print(line, file=sys.stderr, flush=True)

    threading.Thread(target=loop, name="attnsvm-status", daemon=True).start()
    return stop


def verdict_line(ledgers: dict[str, str | os.PathLike], results: str | os.PathLike) -> str:
    """``20 PASS, 0 FAIL, 24 INCONCLUSIVE; report: results/report.html`` from the ledgers
    (``{experiment: claims.json}``) that exist, and the command that builds the report."""
    entries, unread = [], []
    for exp, path in ledgers.items():
        if not Path(path).is_file():
            unread.append(exp)
            continue
        try:
            entries += read_ledger(path, exp)["claims"]
        except (StoreError, OSError, ValueError) as err:
            unread.append(f"{exp} ({err})")
    c = counts(entries)
    line = ", ".join(f"{c[v]} {v}" for v in VERDICTS)
    report = Path(results) / REPORT_NAME
    line += f"; report: {report} (built by: snakemake --report {report})"
    if unread:
        line += f"; no claims ledger read for {len(unread)} experiment(s): {', '.join(unread)}"
    return line


def print_last(line: str) -> None:
    """Print ``line`` to stderr as the process's last line (after Snakemake's own closing
    lines: the log's path, the elapsed time); no status line follows it."""
    atexit.register(_close, line)


def _close(line: str) -> None:
    """Print the last line and end the status lines, as one step under ``_PRINTING``."""
    with _PRINTING:
        _CLOSED.set()
        print(line, file=sys.stderr, flush=True)


__all__ = ["print_last", "start_status_lines", "status_line", "verdict_line"]
