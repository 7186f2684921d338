"""attnsvm: does gradient descent on attention converge to the attention SVM? (docs/science.md)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("attnsvm")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+unknown"

from attnsvm.config.cell import Cell, CellError  # noqa: E402

__all__ = ["Cell", "CellError", "__version__", "run_cells"]


def run_cells(cells, device="auto"):
    """Train and solve cells, batched by shape (:func:`attnsvm.sweep.compute.run_cells`)."""
    from attnsvm.sweep.compute import run_cells as _run

    return _run(cells, device=device)
