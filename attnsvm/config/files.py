"""Reading sweep config files safely: bounded size, no alias bombs, no duplicate keys.

``attnsvm check-config``, ``attnsvm status --configfile`` and the workflow (which re-reads the
files Snakemake loaded, to catch what Snakemake's loader lets through) all read configs here.
Every problem is one :class:`~attnsvm.config.grid.ConfigError` naming the file and, for YAML
problems, the line: a file over MAX_CONFIG_BYTES, a binary (non-UTF-8) file, invalid YAML,
a key given twice in one mapping (``fixed``, an experiment name, ...), more than
MAX_ALIASES alias uses, values nested deeper than MAX_DEPTH, or a path that is no regular file
(a FIFO, which would block the reader, a device such as ``/dev/zero``, a directory): checked
with ``os.stat`` before the file is opened. The parsed value then goes to
:func:`attnsvm.plan.parse_config`, which bounds everything else.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from attnsvm.config.errors import ConfigError

#: largest config file read (bytes); the paper's config is ~3 kB
MAX_CONFIG_BYTES = 4 * 2**20
#: most alias uses (``*name``) in one file; real configs use a handful
MAX_ALIASES = 1000
#: deepest nesting of YAML collections (mappings, lists) in a config; real configs use 4
MAX_DEPTH = 100


class _Loader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate keys and counts alias uses."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._aliases = 0
        self._depth = 0

    def compose_node(self, parent, index):  # type: ignore[no-untyped-def]
        if self._depth >= MAX_DEPTH:
            raise yaml.MarkedYAMLError(
                problem=f"values nested more than {MAX_DEPTH} deep",
                problem_mark=self.peek_event().start_mark,
            )
        self._depth += 1
        try:
            return self._compose_node(parent, index)
        finally:
            self._depth -= 1

    def _compose_node(self, parent, index):  # type: ignore[no-untyped-def]
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                mark = self.peek_event().start_mark
                raise yaml.MarkedYAMLError(
                    problem=f"more than {MAX_ALIASES} aliases (a YAML alias bomb?)",
                    problem_mark=mark,
                )
        return super().compose_node(parent, index)

    def construct_mapping(self, node, deep=False):  # type: ignore[no-untyped-def]
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, Any] = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                try:
                    first = seen.get(key)
                except TypeError:  # an unhashable key: SafeLoader reports it
                    continue
                if first is not None:
                    raise yaml.MarkedYAMLError(
                        problem=f"duplicate key {key!r} (first at line {first.line + 1}); "
                        "the last one would silently win",
                        problem_mark=key_node.start_mark,
                    )
                seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)


def read_config_text(path: str | os.PathLike) -> str:
    """The text of a config file: bounded size, UTF-8, no NUL bytes (one-line errors)."""
    try:
        st = os.stat(path)  # before opening: opening a FIFO blocks, a device never ends
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(f"{path}: {_kind(st.st_mode)}, not a regular file; a config is YAML")
        size = st.st_size
        if size > MAX_CONFIG_BYTES:
            raise ConfigError(
                f"{path}: the file has {size} bytes, more than the {MAX_CONFIG_BYTES} bytes a "
                "config may have; is this the right file?"
            )
        with open(path, "rb") as fh:
            data = fh.read(MAX_CONFIG_BYTES + 1)
    except OSError as err:
        raise ConfigError(f"cannot read {path}: {err.strerror or err}") from None
    if b"\0" in data:
        raise ConfigError(f"{path}: not a text file (it contains NUL bytes); a config is YAML")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(
            f"{path}: not a UTF-8 text file (byte {err.start}); a config is YAML text"
        ) from None


def _kind(mode: int) -> str:
    """What a non-regular file is, in words."""
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "a special file"


def load_config_text(text: str, name: str = "config") -> Any:
    """Parse YAML text safely (see the module docstring); ``name`` is used in messages."""
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or str(err)
        raise ConfigError(f"{name} is not valid YAML{where}: {problem}") from None
    except RecursionError:
        raise ConfigError(f"{name}: nested too deeply") from None


def load_config_file(path: str | os.PathLike) -> Any:
    """Read and parse a config file safely; raises :class:`ConfigError` with one line."""
    return load_config_text(read_config_text(path), str(path))


def config_file_names(paths: Iterable[str | os.PathLike]) -> list[str]:
    """The config files of a run as the report names them: relative to the working directory
    where they lie under it (Snakemake hands them over absolute), so that a results directory
    moved or cloned with its workflow keeps its run_info params and reruns nothing."""
    here = Path.cwd()
    out = []
    for p in paths:
        path = Path(p)
        try:
            out.append(str(path.resolve().relative_to(here.resolve())))
        except ValueError:
            out.append(str(path))
    return out


def check_config_files(paths: Iterable[str | os.PathLike]) -> None:
    """Re-read config files another loader (Snakemake's) already parsed, to catch duplicate
    keys, binary content and alias bombs it lets through."""
    for path in paths:
        load_config_file(path)


def check_results_dir(results: str | os.PathLike) -> None:
    """Refuse a ``results`` path the workflow could not write into (one :class:`ConfigError`
    line naming it): an existing file, a dangling or looping symlink, a path below a file, a
    directory without write permission (or on a read-only file system). A path that does not
    exist yet is fine when its nearest existing parent is a writable directory. Nothing is
    created (docs/store.md, layout)."""
    cur = Path(results)
    while True:
        try:
            st = os.stat(cur)
        except FileNotFoundError:
            if os.path.islink(cur):
                raise ConfigError(
                    f"'results' {str(results)!r}: {cur} is a dangling symlink (its target "
                    f"{os.readlink(cur)!r} does not exist)"
                ) from None
            if cur.parent == cur:
                return
            cur = cur.parent
            continue
        except OSError as err:  # a symlink loop (ELOOP), a path below a file (ENOTDIR), ...
            raise ConfigError(
                f"'results' {str(results)!r}: {cur} cannot be used: {err.strerror or err}"
            ) from None
        if not stat.S_ISDIR(st.st_mode):
            what = "a file" if stat.S_ISREG(st.st_mode) else _kind(st.st_mode)
            raise ConfigError(f"'results' {str(results)!r}: {cur} is {what}, not a directory")
        if not os.access(cur, os.W_OK | os.X_OK) or _read_only(cur):
            raise ConfigError(f"'results' {str(results)!r}: {cur} is not writable")
        return


def _read_only(path: Path) -> bool:
    """Whether ``path`` lies on a file system mounted read-only."""
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False
