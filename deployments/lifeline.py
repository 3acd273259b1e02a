"""Prefect servers started by `tdm` die with it, even when it is killed with SIGKILL.

A stopped `tdm` stops its servers itself (atexit, `finally`), but a process killed with
SIGKILL runs no code: its children live on. On Linux a child can ask the kernel to send it a
signal when its parent dies (`prctl(PR_SET_PDEATHSIG)`), set between fork and exec. `tdm serve`
starts its server so (`deployments.server`); the temporary server Prefect starts for a run with
no PREFECT_API_URL (`tdm impute`, `tdm warehouse`) gets the same through `tie_ephemeral_server`,
and a session of its own, so that a terminal's Ctrl-C reaches `tdm` alone. Elsewhere (macOS,
Windows) nothing changes.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["die_with_parent", "stop_ephemeral_server", "tie_ephemeral_server"]

_PR_SET_PDEATHSIG = 1


def _load_prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None
    return libc.prctl  # type: ignore[no-any-return]


_PRCTL = _load_prctl()  # looked up now: between fork and exec, only this call runs


def die_with_parent() -> Callable[[], None] | None:
    """A `preexec_fn` that makes the child receive SIGKILL when its parent dies (Linux), or
    None where that is not available.

    The kernel ties the signal to the thread that starts the child, so call `Popen` from a
    thread that lives as long as the child should (the main thread)."""
    prctl = _PRCTL
    if prctl is None:
        return None

    def set_death_signal() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)

    return set_death_signal


class _SubprocessWithLifeline:
    """`subprocess` as Prefect's ephemeral-server module sees it: `Popen` children die with
    this process (when started from the main thread) and run in a session of their own, out of
    the terminal's Ctrl-C, so that an interrupted run can still report to its server;
    everything else is `subprocess`."""

    def __getattr__(self, name: str) -> Any:
        return getattr(subprocess, name)

    @staticmethod
    def Popen(*args: Any, **kwargs: Any) -> subprocess.Popen[Any]:  # noqa: N802 (subprocess's name)
        preexec = die_with_parent()
        if (
            preexec is not None
            and kwargs.get("preexec_fn") is None
            and threading.current_thread() is threading.main_thread()
        ):
            kwargs["preexec_fn"] = preexec
            kwargs.setdefault("start_new_session", True)
        return subprocess.Popen(*args, **kwargs)


def tie_ephemeral_server() -> None:
    """Make the temporary Prefect server of this process (started when no PREFECT_API_URL is
    set) die with it, even on SIGKILL. Call once, at the command's entry point."""
    if _PRCTL is None or os.environ.get("PREFECT_API_URL"):
        return  # no temporary server will be started (or this cannot help)
    from prefect.server.api import server

    if isinstance(getattr(server, "subprocess", None), _SubprocessWithLifeline):
        return
    server.subprocess = _SubprocessWithLifeline()  # type: ignore[assignment]


def stop_ephemeral_server() -> None:
    """Stop the temporary Prefect server of this process, if there is one, answering or not: one
    that missed its start-up time may still be starting, and the next client would start
    another beside it."""
    from prefect.server.api.server import SubprocessASGIServer

    SubprocessASGIServer().stop()
