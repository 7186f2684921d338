"""A dataset's skeleton: everything but the values of its data, as plain JSON.

Opening a file decodes the metadata of every variable (netCDF-C / HDF5, zarr and xarray's CF
decoding): for a whole run's stores, thousands of variables, that is most of the time
:func:`attnsvm.open_results` takes. The skeleton of a dataset (docs/store.md, "Layout")
keeps, per variable, its dimensions, shape, dtype, attributes and encoding, and the
values of the coordinates that index it; :func:`from_skeleton` builds the same
``xarray.Dataset`` from it in a fraction of that time, with every other variable lazy: its
first read opens the real dataset (``source``) once and reads from it.

:func:`skeleton` returns None for a dataset it cannot write down exactly (an attribute or a
coordinate of a type JSON does not carry): such a dataset is simply always opened in full.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import math
import os
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr
from xarray.core import indexing

from attnsvm.atomic import write_text_atomic
from attnsvm.provenance import ATTNSVM_VERSION
from attnsvm.sweep.derived import sweep_digest
from attnsvm.sweep.integrity import StoreError, file_sha256
from attnsvm.sweep.summary import open_summary_image

__all__ = ["SkeletonCache", "from_skeleton", "keep_skeletons", "open_store", "skeleton"]

#: coordinates up to this many values are kept in the skeleton (they index the dataset)
MAX_VALUES = 100_000
#: dtype kinds whose values JSON carries exactly (bool, integers, floats, unicode, strings)
_KINDS = "biufUT"


class _Unwritable(Exception):
    """A value the skeleton cannot carry exactly."""


#: packages whose codec objects (frozen dataclasses, in a store's encoding) a skeleton holds
_CODEC_PACKAGES = ("zarr",)


def _dtype(value: np.dtype) -> dict[str, str]:
    if value.kind == "T" and value == np.dtypes.StringDType():
        return {"dtype": "T"}
    if value.kind in _KINDS and np.dtype(value.str) == value:
        return {"dtype": value.str}
    raise _Unwritable(str(value))


def _class_name(value: Any) -> str:
    cls = type(value)
    if cls.__module__.split(".")[0] not in _CODEC_PACKAGES:
        raise _Unwritable(f"{cls.__module__}.{cls.__qualname__}")
    return f"{cls.__module__}:{cls.__qualname__}"


def _encode(value: Any) -> Any:
    """A metadata value as JSON, its type tagged where JSON would lose it."""
    if isinstance(value, bool | str | int | float) and not isinstance(value, np.generic | Enum):
        return value
    if value is None:
        return None
    if isinstance(value, np.ndarray) and value.dtype.kind in _KINDS and value.ndim <= 1:
        return {"ndarray": value.dtype.str, "v": value.tolist()}
    if isinstance(value, np.generic) and value.dtype.kind in _KINDS:
        return {"scalar": value.dtype.str, "v": value.item()}
    if isinstance(value, np.dtype):
        return _dtype(value)
    if isinstance(value, list):
        return [_encode(v) for v in value]
    if isinstance(value, tuple):
        return {"tuple": [_encode(v) for v in value]}
    if isinstance(value, dict):
        return {"mapping": {str(k): _encode(v) for k, v in value.items()}}
    if isinstance(value, Enum):
        return {"enum": _class_name(value), "v": _encode(value.value)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: _encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return {"object": _class_name(value), "fields": fields}
    raise _Unwritable(type(value).__name__)


def _class(name: str) -> Any:
    module, qualname = name.split(":")
    if module.split(".")[0] not in _CODEC_PACKAGES:  # never import what a file names
        raise ValueError(f"not a codec: {name}")
    return getattr(importlib.import_module(module), qualname)


def _decode(value: Any) -> Any:
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "ndarray" in value:
        return np.array(value["v"], dtype=value["ndarray"])
    if "scalar" in value:
        return np.dtype(value["scalar"]).type(value["v"])
    if "dtype" in value:
        return np.dtypes.StringDType() if value["dtype"] == "T" else np.dtype(value["dtype"])
    if "tuple" in value:
        return tuple(_decode(v) for v in value["tuple"])
    if "mapping" in value:
        return {k: _decode(v) for k, v in value["mapping"].items()}
    if "enum" in value:
        return _class(value["enum"])(_decode(value["v"]))
    fields = {k: _decode(v) for k, v in value["fields"].items()}
    return _class(value["object"])(**fields)


def _same(a: Any, b: Any) -> bool:
    """``a`` and ``b`` are equal and of the same types (NaN equal to NaN)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, float | np.floating) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)


def _mapping(values: dict[str, Any]) -> dict[str, Any]:
    return {str(k): _encode(v) for k, v in values.items()}


def skeleton(ds: xr.Dataset, values: Callable[[str], bool]) -> dict[str, Any] | None:
    """The skeleton of ``ds``; ``values(name)`` says which variables' values it keeps (they
    must be in memory, or cheap to read). None where it would not rebuild ``ds`` exactly."""
    variables = {}
    shared: dict[str, int] = {}  # attributes and encodings, each written once

    def ref(values: dict) -> int:
        return shared.setdefault(json.dumps(_mapping(values)), len(shared))

    try:
        for name, var in ds.variables.items():
            entry = {
                "dims": list(var.dims),
                "shape": list(var.shape),
                "dtype": _dtype(var.dtype),
                "attrs": ref(var.attrs),
                "encoding": ref(var.encoding),
            }
            if values(str(name)):
                if var.dtype.kind not in _KINDS or var.size > MAX_VALUES:
                    return None
                entry["values"] = var.values.tolist()
            variables[str(name)] = entry
        skel = {
            "variables": variables,
            "coords": list(ds.coords),
            "attrs": _mapping(ds.attrs),
            "shared": [json.loads(text) for text in shared],
        }
    except _Unwritable:
        return None
    return skel if _rebuilds(skel, ds) else None


def _rebuilds(skel: dict[str, Any], ds: xr.Dataset) -> bool:
    """Whether :func:`from_skeleton` gives back ``ds``'s metadata and kept values exactly."""
    built = from_skeleton(skel, lambda: ds)
    if list(built.variables) != list(ds.variables) or list(built.coords) != list(ds.coords):
        return False
    if not _same_attrs(built.attrs, ds.attrs):
        return False
    for name, var in ds.variables.items():
        other = built.variables[name]
        if (other.dims, other.shape, other.dtype) != (var.dims, var.shape, var.dtype):
            return False
        if not (_same_attrs(other.attrs, var.attrs) and _same_attrs(other.encoding, var.encoding)):
            return False
        if "values" in skel["variables"][str(name)] and not _same(other.values, var.values):
            return False
    return True


def _same_attrs(a: dict, b: dict) -> bool:
    return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)


class _Deferred(xr.backends.BackendArray):
    """A variable of a dataset built from its skeleton: read from ``source()`` when used."""

    def __init__(self, name: str, shape: tuple[int, ...], dtype: np.dtype, source: Callable):
        self.name, self.shape, self.dtype, self.source = name, shape, dtype, source

    def __getitem__(self, key: Any) -> Any:
        return indexing.explicit_indexing_adapter(
            key, self.shape, indexing.IndexingSupport.OUTER, self._read
        )

    def _read(self, key: tuple) -> np.ndarray:
        return np.asarray(self.source().variables[self.name][key].values)


def from_skeleton(skel: dict[str, Any], source: Callable[[], xr.Dataset]) -> xr.Dataset:
    """The dataset of ``skel``: the kept values in memory, every other variable read from
    ``source()`` (the real dataset; called at the first read, and again at each read, so it
    should remember what it opened) when it is used."""
    variables = {}
    shared = skel["shared"]
    for name, entry in skel["variables"].items():
        dtype = _decode(entry["dtype"])
        if "values" in entry:
            data = np.array(entry["values"], dtype=dtype).reshape(entry["shape"])
        else:
            shape = tuple(entry["shape"])
            # wrapped as xarray.open_dataset wraps a backend's variable (cache=True)
            lazy = indexing.LazilyIndexedArray(_Deferred(name, shape, dtype, source))
            data = indexing.MemoryCachedArray(indexing.CopyOnWriteArray(lazy))
        attrs, encoding = shared[entry["attrs"]], shared[entry["encoding"]]
        variables[name] = xr.Variable(
            entry["dims"], data, _decode_mapping(attrs), _decode_mapping(encoding)
        )
    ds = xr.Dataset(variables, attrs=_decode_mapping(skel["attrs"]))  # in the file's order
    return ds.set_coords([name for name in skel["coords"] if name not in ds.coords])


def _decode_mapping(values: dict[str, Any]) -> dict[str, Any]:
    return {k: _decode(v) for k, v in values.items()}


#: in an experiment's directory: the skeletons of its sweep and summary
CACHE_NAME = ".attnsvm-open-cache.json"
CACHE_FORMAT = "attnsvm-open-cache/2"


def kept(ds: xr.Dataset) -> Callable[[str], bool]:
    """Which variables' values a skeleton keeps: those an open reads at once (the indexes and
    ``iteration``, which :func:`attnsvm.results.by_iteration` indexes by)."""
    return lambda name: name in ds.indexes or name == "iteration"


def open_store(path: str | os.PathLike) -> xr.Dataset:
    """A sweep store or summary as :func:`attnsvm.open_results` opens it, and so as its
    skeleton describes it: lazily, chunked as stored (``xr.open_zarr``), a summary from an
    image in memory with its checksum deferred
    (:func:`attnsvm.sweep.summary.open_summary_image`)."""
    path = Path(path)
    return xr.open_zarr(path) if path.suffix == ".zarr" else open_summary_image(path)


def cache_key() -> str:
    """What a skeleton depends on besides its store: the versions of the decoding code."""
    import netCDF4  # xarray's own netCDF backend library; only the summary needs it
    import zarr

    versions = (ATTNSVM_VERSION, xr.__version__, np.__version__, netCDF4.__version__)
    return " ".join((CACHE_FORMAT, *versions, zarr.__version__))


class SkeletonCache:
    """The skeletons of an experiment's stores (``sweep.zarr``, ``summary.nc``), kept in its
    directory (:data:`CACHE_NAME`) between opens.

    The derive job writes them (:func:`keep_skeletons`); an open writes what is missing. Each
    entry is filed under the store's name with the digest of the store it describes (a
    summary's SHA-256, a sweep's ``content_sha256``), under a key naming the versions of the
    decoding code (:func:`cache_key`): an entry is used only for the same store read by the
    same code. The cache only saves work: a missing, unreadable or foreign file is rebuilt,
    and a directory that cannot be written simply gets no cache.
    """

    def __init__(self, directory: str | os.PathLike):
        self.path, self.key = Path(directory) / CACHE_NAME, cache_key()
        self.old: dict[str, Any] = {}
        self.new: dict[str, Any] = {}
        try:
            cache = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return
        if isinstance(cache, dict) and cache.get("key") == self.key:
            entries = cache.get("entries")
            self.old = entries if isinstance(entries, dict) else {}

    def open(
        self, store: str | os.PathLike, digest: str, digest_now: Callable[[], str]
    ) -> xr.Dataset:
        """The store at ``store`` (in this directory) whose digest is ``digest``: built from
        its skeleton when the cache holds one for that digest, else opened
        (:func:`open_store`) and its skeleton kept.

        A store built from its skeleton is opened at the first read of a variable, once
        ``digest_now()`` still gives ``digest`` (else :class:`StoreError`: the store was
        replaced since) and its skeleton is the one cached (else :class:`StoreError` naming
        the cache)."""
        name = Path(store).name
        entry = self.old.get(name)
        built = None
        if isinstance(entry, dict) and entry.get("digest") == digest:
            opened: list[xr.Dataset] = []

            def source() -> xr.Dataset:
                if not opened:
                    if digest_now() != digest:
                        raise StoreError(store, "replaced since it was opened", "stale")
                    ds = open_store(store)
                    if json.dumps(skeleton(ds, kept(ds))) != json.dumps(entry["skeleton"]):
                        raise StoreError(self.path, f"does not describe {store}: remove it")
                    opened.append(ds)
                return opened[0]

            try:
                built = from_skeleton(entry["skeleton"], source)
            except (KeyError, TypeError, ValueError, IndexError, AttributeError):
                pass  # not a skeleton this code wrote: the store is opened, its own kept
        if built is not None:
            self.new[name] = entry
            return built
        return self.keep(store, digest)

    def keep(self, store: str | os.PathLike, digest: str) -> xr.Dataset:
        """Open the store at ``store`` (:func:`open_store`) and keep its skeleton under
        ``digest``; returns it."""
        ds = open_store(store)
        skel = skeleton(ds, kept(ds))
        if skel is not None:
            self.new[Path(store).name] = {"digest": digest, "skeleton": skel}
        return ds

    def save(self) -> None:
        """Write the entries this open used or made, when they differ from the file's."""
        if self.new.keys() == self.old.keys() and all(self.new[k] is self.old[k] for k in self.new):
            return
        text = json.dumps({"key": self.key, "entries": self.new}, separators=(",", ":"))
        try:
            write_text_atomic(self.path, text)
        except OSError:
            pass


def keep_skeletons(sweep: str | os.PathLike, summary: str | os.PathLike) -> None:
    """Keep the skeletons of an experiment's sweep store and summary (both just written, in
    one directory) for :func:`attnsvm.open_results` (the derive job, after the summary)."""
    cache = SkeletonCache(Path(summary).parent)
    cache.keep(sweep, sweep_digest(sweep))
    cache.keep(summary, file_sha256(summary))
    cache.save()
