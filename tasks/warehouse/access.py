"""Whether this process can write the DuckDB file, and who holds its lock when it cannot open it.

Both are asked before any work is done: a file that cannot be written is refused before the
fit, not after it, and a lock held by another process is named as what it is (a reader blocks a
writer too, under DuckDB's one-writer-or-many-readers rule).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from tasks.errors import PipelineInputError, setting

__all__ = ["busy_message", "check_folder_writable", "check_writable"]

_HOLDER_PID = re.compile(r"\(PID (\d+)\)")


def busy_message(path: Path, error: BaseException, *, read_only: bool) -> str:
    """The message for a lock conflict on `path` met while opening it (`read_only` or not)."""
    text = str(error)
    found = _HOLDER_PID.search(text)
    holder = f"another process (PID {found.group(1)})" if found else "another process"
    # DuckDB adds this hint only when the holder has the file open read-only (a shared lock).
    holder_reads = "read-only mode" in text
    if holder_reads and not read_only:
        return (
            f"Database file '{path}' is open in {holder}, which is reading it; DuckDB lets a "
            "process write to a file only while no other process has it open. Retry when that "
            "process has closed it."
        )
    wanted = "read" if read_only else "write to"
    return (
        f"Database file '{path}' is locked by {holder}, which is writing to it; DuckDB lets "
        f"no other process {wanted} it meanwhile. Retry when that process has finished."
    )


_NOT_IMPUTED = (
    "A run could not write what it imputes, so nothing was imputed (this is checked before the "
    "fit, in a dry run too)"
)


def check_writable(db_path: str | Path, *, refused: str = _NOT_IMPUTED) -> None:
    """Refuse a DuckDB file that this process could not write: the file itself, or the folder
    beside it where DuckDB writes its write-ahead log and the pipeline its staging files. The
    message gives the reason, then `refused` (what was not done).

    Called before the imputation, so that a read-only file or file system is found before the
    fit, not when its result is to be written. A missing file is left to `connect` to report.
    """
    path = Path(db_path)
    if not path.is_file():
        return
    folder = path.resolve().parent
    if _read_only_file_system(path):
        reason = "it is on a read-only file system"
    elif not os.access(path, os.W_OK):
        reason = "the file is read-only for this user"
    elif not os.access(folder, os.W_OK | os.X_OK):
        reason = (
            f"its folder '{folder}' is read-only for this user (DuckDB writes its write-ahead "
            "log beside the file)"
        )
    else:
        return
    raise PipelineInputError(
        f"Database file '{path}' cannot be written: {reason}. {refused}; make it writable, "
        "or copy it somewhere writable and give that path "
        f"({setting('db_path')})."
    )


def check_folder_writable(folder: Path, *, what: str, refused: str = _NOT_IMPUTED) -> None:
    """Refuse `folder` (described by `what`, e.g. "The model folder ... (TDM_MODEL_DIR)") when
    this process could not create files in it, or create it where it does not exist yet."""
    place = folder
    while not place.exists() and place != place.parent:
        place = place.parent
    if not place.is_dir():
        reason = f"'{place}' is a file, not a folder"
    elif _read_only_file_system(place):
        reason = "it is on a read-only file system"
    elif not os.access(place, os.W_OK | os.X_OK):
        reason = f"'{place}' is read-only for this user"
    else:
        return
    raise PipelineInputError(f"{what} cannot be written: {reason}. {refused}.")


def _read_only_file_system(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):  # no statvfs (Windows): the access checks decide
        return False
