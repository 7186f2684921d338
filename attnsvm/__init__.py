"""attnsvm: does gradient descent on attention converge to the attention SVM? (SCIENCE.md)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("attnsvm")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+unknown"

from attnsvm.cell import Cell, CellError  # noqa: E402

__all__ = ["Cell", "CellError", "__version__", "run_cells"]


def run_cells(cells, device="auto"):
    """Train and solve a list of cells, batched by shape; see :func:`attnsvm.run.run_cells`."""
    from attnsvm.run import run_cells as _run

    return _run(cells, device=device)
