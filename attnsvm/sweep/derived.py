"""Digests of derived outputs: every output built from the blocks records what it was built from.

A block store is checked against its manifest (:mod:`attnsvm.sweep.integrity`); what is built
from the blocks is held to the same standard (docs/store.md, "Derived outputs"):

- ``sweep.zarr`` (a store with a manifest) records in its manifest ``inputs_sha256``, the
  digest of the block manifests it was collected from (:func:`blocks_digest`); its own digest
  is the manifest's ``content_sha256``.
- ``summary.nc``, each figure (PDF, PNG, caption), ``status.html``, the claims ledger
  (``claims.json`` and ``claims.csv``: inputs ``sweep`` and ``claims``, the digest of the
  claims' settings), the report's run section ``run_info.rst`` (run-level: inputs
  ``sweep:<experiment>`` of every experiment) and its claims page (``claims.html`` and
  ``claims.rst``: inputs ``ledger:<experiment>``, each ledger's SHA-256) get a *record*, a small
  JSON file next to them (``<output>.digest.json``; one per figure, ``<figure>.digest.json``)
  written last: the experiment, the size and SHA-256 of each file, and the digests of its
  inputs (``sweep``: the sweep's digest; ``summary``: the summary's SHA-256; ``code``: the
  figure module's SHA-256).

:func:`check_record` checks a record against the files and the expected inputs; the workflow's
repair step (:meth:`attnsvm.plan.Plan.repair`) removes a derived output that does not check
out, so that the README resume rebuilds it, and each consumer (summary, figure, status table)
checks its input before reading it (one :class:`~attnsvm.sweep.integrity.StoreError` naming
the file).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from attnsvm.atomic import write_text_atomic
from attnsvm.sweep.integrity import StoreError, file_sha256, verify_store

RECORD_FORMAT = "attnsvm-derived-1"
RECORD_SUFFIX = ".digest.json"


def record_of(output: str | os.PathLike) -> Path:
    """The record next to a derived file (``summary.nc`` -> ``summary.nc.digest.json``)."""
    p = Path(output)
    return p.with_name(p.name + RECORD_SUFFIX)


def figure_record(png: str | os.PathLike) -> Path:
    """The record of a figure, next to its PNG (``e1.png`` -> ``e1.digest.json``)."""
    p = Path(png)
    return p.with_name(p.stem + RECORD_SUFFIX)


def blocks_digest(
    block_paths: Mapping[str, str | os.PathLike], known: Mapping[str, str] | None = None
) -> str:
    """Digest of the block stores a sweep is collected from: SHA-256 over ``{block name:
    content_sha256 of its manifest}`` of those that exist (manifests read, files not hashed;
    a store without a readable manifest counts as ``""``). ``known``: content_sha256 of
    stores whose manifests the caller read a moment ago (the repair step), not read again."""
    found = {}
    known = known or {}
    for name, path in sorted(block_paths.items()):
        if name in known:
            found[name] = known[name]
            continue
        if not os.path.lexists(path):
            continue
        try:
            found[name] = str(verify_store(path, contents=False).get("content_sha256", ""))
        except StoreError:
            found[name] = ""
    return _sha256_json(found)


def sweep_digest(sweep: str | os.PathLike) -> str:
    """The digest of a sweep store: its manifest's ``content_sha256`` (manifest read only)."""
    return str(verify_store(sweep, contents=False).get("content_sha256", ""))


def figure_code_digest(name: str) -> str:
    """SHA-256 of the source of figure ``name``'s module (found, not imported)."""
    spec = importlib.util.find_spec(f"attnsvm.report.figures.{name}")
    if spec is None or spec.origin is None:
        raise ValueError(f"no module for figure {name!r}")
    return file_sha256(Path(spec.origin))


def write_record(
    record: str | os.PathLike,
    kind: str,
    experiment: str,
    files: Sequence[str | os.PathLike],
    inputs: Mapping[str, str],
) -> dict[str, Any]:
    """Write the record of the derived ``files`` (all in the record's folder), built from
    ``inputs`` (``{name: digest}``); written last, after the files (docs/store.md)."""
    body = {
        "format": RECORD_FORMAT,
        "kind": kind,
        "experiment": experiment,
        "inputs": dict(sorted(inputs.items())),
        "files": {Path(f).name: [Path(f).stat().st_size, file_sha256(Path(f))] for f in files},
    }
    write_text_atomic(record, json.dumps(body, indent=1, sort_keys=True))
    return body


def check_record(
    record: str | os.PathLike,
    kind: str,
    experiment: str,
    inputs: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The record once every file it lists matches its size and SHA-256, it names ``kind``
    and ``experiment`` and (when given) holds exactly ``inputs``.

    Raises :class:`StoreError` naming the first file that does not check out: state
    ``damaged`` (no or unreadable record, a file missing or changed), ``foreign`` (another
    experiment's or kind's record) or ``stale`` (built from other inputs).
    """
    record = Path(record)
    try:
        body = json.loads(record.read_text())
        files = body["files"]
        if body.get("format") != RECORD_FORMAT or not isinstance(files, dict) or not files:
            raise ValueError("unknown record format")
    except FileNotFoundError:
        raise StoreError(
            record, "no digest record (written last: the output is incomplete)"
        ) from None
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise StoreError(record, f"unreadable digest record: {err}") from None
    for name, entry in sorted(files.items()):
        path = record.parent / name
        try:
            size, sha = entry
            actual = path.stat().st_size
        except FileNotFoundError:
            raise StoreError(path, "missing (listed in its digest record)") from None
        except (OSError, TypeError, ValueError) as err:
            raise StoreError(path, f"cannot be checked: {err}") from None
        if actual != size:
            raise StoreError(path, f"has {actual} bytes, its digest record {size}")
        if file_sha256(path) != sha:
            raise StoreError(path, "does not match the SHA-256 of its digest record")
    main = record.parent / sorted(files)[0]
    if body.get("kind") != kind or body.get("experiment") != experiment:
        where = f"{body.get('kind')} of experiment {body.get('experiment')!r}"
        raise StoreError(main, f"its digest record describes the {where}", "foreign")
    if inputs is not None and body.get("inputs") != dict(inputs):
        changed = sorted(k for k in {*inputs, *body.get("inputs", {})}
                         if dict(inputs).get(k) != body.get("inputs", {}).get(k))  # fmt: skip
        raise StoreError(main, f"built from another {', '.join(changed)}", "stale")
    return body


def text_digest(text: str) -> str:
    """SHA-256 of a text (a canonical JSON setting, e.g. an experiment's claims)."""
    return hashlib.sha256(text.encode()).hexdigest()


def claims_inputs(sweep: str | os.PathLike, claims: str) -> dict[str, str]:
    """What a claims ledger is built from: the sweep's digest and the claims' canonical JSON
    (:meth:`attnsvm.plan.Plan.claims_config`)."""
    return {"sweep": sweep_digest(sweep), "claims": text_digest(claims)}


def run_info_inputs(sweeps: Mapping[str, str | os.PathLike]) -> dict[str, str]:
    """What the report's run section is built from: every experiment's sweep digest."""
    return {f"sweep:{exp}": sweep_digest(path) for exp, path in sorted(sweeps.items())}


def claims_page_inputs(ledgers: Mapping[str, str | os.PathLike]) -> dict[str, str]:
    """What the report's claims page is built from: every ledger's SHA-256 (as its record
    lists it; "" for a ledger without one)."""
    return {
        f"ledger:{exp}": record_sha(record_of(path), Path(path).name)
        for exp, path in sorted(ledgers.items())
    }


def record_sha(record: str | os.PathLike, name: str) -> str:
    """The SHA-256 a record lists for its file ``name`` ("" if none)."""
    try:
        return str(json.loads(Path(record).read_text())["files"][name][1])
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return ""


def _sha256_json(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()
