"""A Prefect server for one machine: `prefect server start` as a child process, stopped on exit.

Prefect's ephemeral API lives inside one process, so runs triggered from another terminal could
not reach the deployments it serves; `tdm serve` starts this server instead when no
PREFECT_API_URL is set.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from deployments.lifeline import die_with_parent
from tasks.errors import PipelineError

__all__ = [
    "DEFAULT_PORT",
    "api_url_for",
    "default_port",
    "local_server",
    "server_answers",
    "server_environment",
]

DEFAULT_PORT = 4200
"""The port `tdm serve` starts its server on and `tdm run` looks for it on (Prefect's default)."""

HOST = "127.0.0.1"

_UI_API_URL_VARIABLES = ("PREFECT_UI_API_URL", "PREFECT_SERVER_UI_API_URL")


def default_port() -> int:
    """The port of the server `tdm serve` starts and `tdm run` looks for: Prefect's setting
    PREFECT_SERVER_API_PORT (default 4200)."""
    from prefect.settings import get_current_settings

    return int(get_current_settings().server.api.port)


def api_url_for(port: int, host: str = HOST) -> str:
    """The API URL of a Prefect server on this machine."""
    return f"http://{host}:{port}/api"


def server_answers(api_url: str, *, timeout: float = 5.0) -> bool:
    """Whether a Prefect server answers its health check at `api_url`."""
    import httpx

    try:
        return httpx.get(f"{api_url.rstrip('/')}/health", timeout=timeout).status_code == 200
    except httpx.HTTPError:
        return False


@contextlib.contextmanager
def local_server(
    port: int = DEFAULT_PORT, *, log_path: Path, startup_timeout: float = 120.0
) -> Iterator[str]:
    """Start `prefect server start` on 127.0.0.1:`port`, yield its API URL once it answers.

    The server's output goes to `log_path`. Its UI talks to the API on the same port (unless
    PREFECT_UI_API_URL is set, e.g. for a proxy). It runs in its own process group, so that a
    Ctrl-C reaches the serving process first, which stops the server last (terminate, then
    kill); if the serving process is killed outright (SIGKILL), the kernel kills the server
    (Linux).
    """
    _check_port_free(port)
    url = api_url_for(port)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb") as log:
        command = [sys.executable, "-m", "prefect", "server", "start"]
        process = subprocess.Popen(
            [*command, "--host", HOST, "--port", str(port)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=server_environment(port),
            start_new_session=True,
            preexec_fn=die_with_parent(),  # dies with `tdm serve`, even on SIGKILL (Linux)
        )
        try:
            _wait_until_healthy(process, url, log_path, startup_timeout)
            yield url
        finally:
            _stop(process)


def server_environment(port: int, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of `prefect server start` on 127.0.0.1:`port`.

    `prefect server start --port` tells uvicorn where to listen but not the UI, which builds its
    API address from PREFECT_SERVER_API_HOST and PREFECT_SERVER_API_PORT (default 4200): set
    here, with PREFECT_UI_API_URL, so that the UI talks to this server. A PREFECT_UI_API_URL the
    user set is kept.

    Web pages of other sites must not drive the server through a browser on this machine:
    Prefect's CSRF protection is on and cross-origin requests are allowed from the UI's own
    addresses only (127.0.0.1 and localhost on `port`), unless the environment sets either.
    """
    env = dict(os.environ if environ is None else environ)
    env.pop("PREFECT_API_URL", None)  # the server is the API; it needs no client address
    env["PREFECT_SERVER_API_HOST"] = HOST
    env["PREFECT_SERVER_API_PORT"] = str(port)
    env.setdefault("PREFECT_SERVER_API_CSRF_PROTECTION_ENABLED", "true")
    env.setdefault(
        "PREFECT_SERVER_API_CORS_ALLOWED_ORIGINS", f"http://{HOST}:{port},http://localhost:{port}"
    )
    if not any(name in env for name in _UI_API_URL_VARIABLES):
        env["PREFECT_UI_API_URL"] = api_url_for(port)
    return env


def _check_port_free(port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # As a server binds: the connections of one stopped seconds ago (TIME_WAIT) do not
        # hold the port, a listening socket does.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((HOST, port))
        except OSError:
            raise PipelineError(
                f"Port {port} on {HOST} is in use: pass another with --port, or, if a Prefect "
                f"server runs there, serve against it with PREFECT_API_URL={api_url_for(port)}."
            ) from None


def _wait_until_healthy(
    process: subprocess.Popen[bytes], url: str, log_path: Path, timeout: float
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise PipelineError(
                f"The Prefect server exited with status {process.returncode} while starting: "
                f"{_tail(log_path)} (full output in {log_path})"
            )
        if server_answers(url, timeout=2.0):
            return
        time.sleep(0.5)
    raise PipelineError(
        f"The Prefect server did not answer at {url} within {timeout:.0f} s "
        f"(its output is in {log_path})."
    )


def _stop(process: subprocess.Popen[bytes], grace: float = 15.0) -> None:
    """Terminate the server's process group, then kill it if it has not exited within `grace`."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        if process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=wait)


def _tail(path: Path, lines: int = 5) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return "no output"
    return " | ".join(line.strip() for line in text[-lines:] if line.strip()) or "no output"
