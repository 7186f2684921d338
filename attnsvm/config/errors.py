"""The two errors of a configuration: a bad cell field and a bad sweep config.

Both are :class:`ValueError` s whose message is one line naming the key, the value and what is
allowed; the command line and the workflow print that line and nothing else.
"""

from __future__ import annotations


class CellError(ValueError):
    """A cell field has a value outside what is allowed; the message names field and value."""


class ConfigError(ValueError):
    """A sweep configuration problem; the message names the key, the value and what is allowed."""
