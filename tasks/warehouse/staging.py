"""Scratch folders of partitioned runs (`.tdm-staging-*`, beside the warehouse).

Each folder names its owner (PID and host); a folder whose owner is gone (a run killed with
SIGKILL, a power loss) is removed by the next partitioned run on that warehouse.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import time
from pathlib import Path

from tasks.logs import step_logger

__all__ = ["STAGE_PREFIX", "make_stage_dir", "remove_stale_stages"]

STAGE_PREFIX = ".tdm-staging-"
_OWNER_FILE = "owner"
_UNCLAIMED_GRACE_SECONDS = 3600.0
"""A staging folder with no owner file (its run was killed while creating it) is stale after
this."""


def make_stage_dir(where: Path) -> str:
    """A fresh staging folder in `where`, owned by this process; stale ones are removed first."""
    remove_stale_stages(where)
    stage_dir = tempfile.mkdtemp(prefix=STAGE_PREFIX, dir=where)
    (Path(stage_dir) / _OWNER_FILE).write_text(f"{os.getpid()}\n{socket.gethostname()}\n")
    return stage_dir


def remove_stale_stages(where: Path) -> list[Path]:
    """Remove the staging folders in `where` whose owning process is gone; returns them.

    A folder owned by a process of another host is left alone (its liveness cannot be known
    here), and so is one this user cannot remove: it is then named in a warning."""
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
        pid_text, host = [*(folder / _OWNER_FILE).read_text().split(), ""][:2]
    except OSError:  # not claimed (yet): stale only once it is old
        try:
            age = time.time() - folder.stat().st_mtime
        except OSError:
            return False
        return age > _UNCLAIMED_GRACE_SECONDS
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # it exists, owned by another user
        return False
    return False
