"""Checks ``serve`` runs before it touches anything, and ``kafka-sidecar doctor`` prints.

Each check returns the problem as one line a newcomer can act on, or None. They only look:
nothing is created or written (a listener port is bound and closed at once; a data dir lock
is tried and released), so ``doctor`` can run beside a server and ``serve`` refuses a taken
port or an unusable data dir before it initialises the data dir.
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

from kafka_sidecar.storage.log_manager import LOCK_FILE

from .listeners import Endpoint, bind_sockets


def data_dir_problem(data_dir: Path) -> str | None:
    """Why ``data_dir`` cannot be used (not a directory, under a file, not writable, locked)."""
    path = Path(data_dir)
    if path.exists() and not path.is_dir():
        return f"data dir {path} is a file, not a directory"
    if not path.exists():
        parent = path.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        if not parent.is_dir():
            return f"data dir {path} cannot be created: {parent} is a file, not a directory"
        if not os.access(parent, os.W_OK | os.X_OK):
            return f"data dir {path} cannot be created: {parent} is not writable"
        return None
    if not os.access(path, os.W_OK | os.X_OK):
        return f"data dir {path} is not writable"
    lock = path / LOCK_FILE
    if lock.exists():
        try:
            fd = os.open(lock, os.O_RDONLY)
        except OSError as e:
            return f"data dir {path}: cannot open {LOCK_FILE}: {e.strerror}"
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return f"data dir {path} is in use by another process (lock held on {LOCK_FILE})"
        finally:
            os.close(fd)  # closing releases the lock
    return None


def listener_problem(endpoint: Endpoint) -> str | None:
    """Why ``endpoint`` cannot be listened on (port taken, address not on this machine)."""
    if endpoint.port == 0:
        return None  # the kernel picks a free one
    try:
        socks = bind_sockets(endpoint.host, endpoint.port, attempts=1)
    except OSError as e:
        reason = e.strerror or str(e)
        if e.errno == errno.EADDRINUSE:
            reason += " (another process listens there: pick another with --listen HOST:PORT, or LISTEN=... for make run)"
        return f"cannot listen on {endpoint.uri()}: {reason}"
    for s in socks:
        s.close()
    return None
