"""Raw calls to a Prefect server's API as the UI makes them: `tdm serve`'s server takes a
change only with a CSRF token, which Prefect's own client fetches by itself."""

from __future__ import annotations

import uuid
from typing import Any

import httpx


def api_post(api_url: str, path: str, json: Any, timeout: float = 10) -> httpx.Response:
    """POST `json` to `api_url` + `path`, with a CSRF token where the server asks for one."""
    client = str(uuid.uuid4())
    token = httpx.get(f"{api_url}/csrf-token", params={"client": client}, timeout=timeout)
    headers = (
        {"Prefect-Csrf-Token": token.json()["token"], "Prefect-Csrf-Client": client}
        if token.status_code == 200
        else {}
    )
    return httpx.post(f"{api_url}{path}", json=json, headers=headers, timeout=timeout)
