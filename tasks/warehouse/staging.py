"""Scratch folders of partitioned runs (`.tdm-staging-*`, beside the warehouse).

Each folder holds an owner file naming its run's process (PID and host), which that process
keeps locked (`flock`) until it removes the folder. The kernel drops the lock when the process
ends, however it ends (SIGKILL, an out-of-memory kill, a container stopped), so a folder whose
owner file can be locked is left by a run that is gone, and the next partitioned run on that
warehouse removes it; a PID used again by another process, as in every container, does not keep
it. A folder of another host's run goes only once nothing in it has changed for an hour (some
mounts keep locks to each host); where the file system cannot lock, the PID and host decide.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import socket
import tempfile
import time
from pathlib import Path
from typing import IO

from tasks.logs import step_logger

__all__ = ["STAGE_PREFIX", "StageDir", "make_stage_dir", "remove_stale_stages"]

STAGE_PREFIX = ".tdm-staging-"
_OWNER_FILE = "owner"
_UNCLAIMED_GRACE_SECONDS = 3600.0
"""A staging folder whose owner file names no process yet (its run was killed while creating
it), or names one of another host, is stale once nothing in it has changed for this long."""


class StageDir:
    """A staging folder this process owns: its owner file stays locked until :meth:`remove`."""

    def __init__(self, path: str, owner: IO[str]) -> None:
        self.path = path
        self._owner = owner

    def remove(self) -> None:
        """Remove the folder, then let go of its owner file."""
        try:
            shutil.rmtree(self.path, ignore_errors=True)
        finally:
            self._owner.close()


def make_stage_dir(where: Path) -> StageDir:
    """A fresh staging folder in `where`, owned by this process; stale ones are removed first."""
    remove_stale_stages(where)
    path = tempfile.mkdtemp(prefix=STAGE_PREFIX, dir=where)
    owner = open(Path(path) / _OWNER_FILE, "w", encoding="utf-8")  # noqa: SIM115 (held open)
    try:
        with contextlib.suppress(OSError):  # no locks here: the PID and host decide
            fcntl.flock(owner, fcntl.LOCK_EX | fcntl.LOCK_NB)
        owner.write(f"{os.getpid()}\n{socket.gethostname()}\n")  # named once locked
        owner.flush()
    except BaseException:
        owner.close()
        shutil.rmtree(path, ignore_errors=True)
        raise
    return StageDir(path, owner)


def remove_stale_stages(where: Path) -> list[Path]:
    """Remove the staging folders in `where` whose owning process is gone; returns them.

    One that cannot be told gone (owned by a process of another host, where the file system
    cannot lock) is left alone, and so is one this user cannot remove: it is then named in a
    warning."""
    removed = []
    for folder in sorted(where.glob(f"{STAGE_PREFIX}*")):
        if not folder.is_dir() or not _is_stale(folder):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        if folder.exists():
            step_logger(__name__).warning(
                "Staging folder %s was left by a run that is gone, and could not be removed: "
                "delete it by hand.",
                folder,
            )
        else:
            removed.append(folder)
    if removed:
        step_logger(__name__).warning(
            "Removed %d staging folder(s) left by runs that were killed: %s",
            len(removed),
            ", ".join(str(f) for f in removed),
        )
    return removed


def _is_stale(folder: Path) -> bool:
    try:
        with open(folder / _OWNER_FILE, encoding="utf-8") as owner:
            pid_text, host = [*owner.read().split(), ""][:2]
            if not pid_text:  # not named yet: its run is creating it, or was killed doing so
                return _unclaimed_for_long(folder)
            try:  # shared: it needs no write access, and meets the owner's exclusive lock
                fcntl.flock(owner, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:  # its owner holds it
                return False
            except OSError:  # no locks on this file system
                return _owner_gone(pid_text, host)
            # Let go when closed: the folder is removed next. A run of another host may hold a
            # lock this host cannot see (a mount that keeps locks local): its folder goes only
            # once nothing in it has changed for long.
            return host == socket.gethostname() or _unclaimed_for_long(folder)
    except OSError:  # no owner file (yet)
        return _unclaimed_for_long(folder)


def _unclaimed_for_long(folder: Path) -> bool:
    """Whether nothing in `folder` has changed for `_UNCLAIMED_GRACE_SECONDS`."""
    try:
        changed = max(path.stat().st_mtime for path in (folder, *folder.iterdir()))
    except OSError:
        return False
    return time.time() - changed > _UNCLAIMED_GRACE_SECONDS


def _owner_gone(pid_text: str, host: str) -> bool:
    """Whether the process the owner file names is gone (known on its own host only)."""
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # it exists, owned by another user
        return False
    return False
