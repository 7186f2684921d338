"""Environmental failures: the machine, not the block, made a block fail (docs/store.md).

A block that fails for an environmental reason (a full disk, an exceeded quota, a CUDA device
asked for on a machine without one) is not recorded as failed cells: the next run of the
workflow retries it (:data:`attnsvm.codes.FAILURE_KINDS`). The worker and the job tell such
failures apart here, without loading torch, so a block that trains nothing never pays for it.
"""

from __future__ import annotations

import errno


class EnvironmentFailure(RuntimeError):
    """The machine, not the block, made the block fail (see :data:`codes.FAILURE_KINDS`)."""


class DeviceUnavailableError(RuntimeError):
    """A CUDA device was asked for (``device: cuda`` / ``cuda:N``) and this machine has none.

    An environmental failure, not a bad input: the same job can succeed on a machine with a
    GPU, and nothing was computed. ``device: auto`` never raises it (it falls back to the CPU).
    """


ENVIRONMENT_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
"""OSErrors that say the machine is at fault: disk full, quota exceeded."""


def is_environmental(err: BaseException) -> bool:
    """Whether ``err`` is an environmental failure (retried by the next run, not recorded)."""
    if isinstance(err, EnvironmentFailure | DeviceUnavailableError):
        return True
    return isinstance(err, OSError) and err.errno in ENVIRONMENT_ERRNOS
