"""`tdm serve`'s check that its port is free, before it starts a Prefect server."""

from __future__ import annotations

import socket

import pytest

from deployments.server import HOST, _check_port_free
from tasks.errors import PipelineError


def _connection_closed_by_the_server() -> int:
    """A port whose listener is gone, its last connection closed by the server side first:
    that connection waits in TIME_WAIT on the port, as after stopping `tdm serve` (whose
    server, uvicorn, listens with SO_REUSEADDR, as here)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((HOST, 0))
        listener.listen()
        port = listener.getsockname()[1]
        client = socket.create_connection((HOST, port))
        accepted, _ = listener.accept()
        accepted.close()  # the server side closes first: its address enters TIME_WAIT
        client.recv(1)
        client.close()
    return port


def test_a_port_just_freed_by_a_stopped_server_is_free() -> None:
    """Bug: restarting `tdm serve` within a minute of stopping it was refused with "port in
    use", though nothing listened there (connections in TIME_WAIT)."""
    _check_port_free(_connection_closed_by_the_server())


def test_a_port_a_server_listens_on_is_refused() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind((HOST, 0))
        listener.listen()
        with pytest.raises(PipelineError, match=r"Port \d+ on 127.0.0.1 is in use"):
            _check_port_free(listener.getsockname()[1])
