"""Process-level defence in depth for the server: nothing it starts should be able to read it."""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger(__name__)
PR_SET_DUMPABLE = 4


def make_undumpable() -> bool:
    """`prctl(PR_SET_DUMPABLE, 0)`: no core dumps, and /proc/<pid>/environ, mem, maps of this
    process become root-only even for same-uid processes. True when it took effect (Linux)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name, use_errno=True)
        done = libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False
    if not done:
        log.warning("prctl(PR_SET_DUMPABLE, 0) failed: errno %s", ctypes.get_errno())
    return done
