"""attnsvm: does gradient descent on attention converge to the attention SVM? (docs/science.md)."""

from attnsvm.provenance import ATTNSVM_VERSION as __version__

__all__ = ["Cell", "CellError", "__version__", "open_results", "run_cells"]


def __getattr__(name):
    # Cell and CellError on first use: a workflow job that only starts a forked worker
    # (attnsvm.sweep.forkserver) never pays for pydantic and numpy
    if name in ("Cell", "CellError"):
        from attnsvm.config import cell  # pydantic: on first use only

        return getattr(cell, name)
    raise AttributeError(f"module 'attnsvm' has no attribute {name!r}")


def run_cells(cells, device="auto", threads=None):
    """Train and solve cells, batched by shape, on ``threads`` cores (default: those the process
    was given; :func:`attnsvm.tasks.run_cells`)."""
    # scipy and the solvers: ``import attnsvm`` stays light for the command line
    from attnsvm.tasks import run_cells as _run

    return _run(cells, device=device, threads=threads)


def open_results(results="results", *, verify=False, chunks=None):
    """A whole run as one ``xarray.DataTree`` (:func:`attnsvm.results.open_results`)."""
    # xarray, pandas and zarr: ``import attnsvm`` stays light for the command line
    from attnsvm.results import open_results as _open

    return _open(results, verify=verify, chunks=chunks)
