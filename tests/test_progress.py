"""The console's last line is the verdict line, whatever the status thread is doing
(attnsvm/progress.py; CI once saw a status line printed after it)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import atexit, time
    import attnsvm.progress as progress

    progress.status_line = lambda results, configfile: "attnsvm: status"
    # registered first, so it runs after the verdicts' handler: other exit work that
    # takes time while the status thread is still alive
    atexit.register(time.sleep, 0.3)
    progress.start_status_lines("results", "config.yaml", interval=0.005)
    time.sleep(0.05)
    progress.print_last("2 PASS, 0 FAIL, 1 INCONCLUSIVE; report: results/report.html")
    """
)


def test_no_status_line_follows_the_verdicts():
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert "attnsvm: status" in lines  # the thread did print while the run went on
    assert lines[-1].startswith("2 PASS, 0 FAIL, 1 INCONCLUSIVE"), lines[-3:]
