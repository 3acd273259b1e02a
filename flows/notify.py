"""Failure notifications: a JSON POST to a webhook when an imputation flow run fails or crashes.

One setting enables it: `TDM_NOTIFY_URL` (`PipelineSettings.notify_url`), in the environment of
the process that runs the flows (`tdm serve`, a worker, `tdm impute`). `notify_failure` is the
`on_failure` and `on_crashed` hook of `impute-table` and `impute-warehouse`. The body names the
flow, the run, its tables and warehouse (from the run's tags), the reason (the state's message)
and the run's page in the UI when the UI's address is known; its `text` field is the same in one
line, which chat webhooks (Slack, Mattermost, Teams workflows) show as the message. A POST that
fails or times out is logged as a warning and never changes the run's state.

What leaves the machine is kept lean: absolute paths in the reason are cut to their last part
(`.../warehouse.duckdb`; the run's page has the whole message), a redirect is not followed, and
neither the run's log nor an error names the webhook's path, where its token usually is.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit

from flows.runs import TABLE_TAG, WAREHOUSE_TAG

__all__ = [
    "NOTIFY_TIMEOUT_SECONDS",
    "check_notify_url",
    "failure_summary",
    "notify_failure",
    "post_json",
]

NOTIFY_TIMEOUT_SECONDS = 5.0
"""How long a notification may take: a webhook that hangs must not hold up the run's end."""

# An absolute POSIX path's folders (not a URL's path: no word, ':' or '/' before its first '/').
_FOLDERS = re.compile(r"(?<![\w:/.~-])/(?:[^\s'\"/]+/)+(?=[^\s'\"/])")


def notify_failure(flow: Any, flow_run: Any, state: Any) -> None:
    """Prefect hook: POST `failure_summary` to `TDM_NOTIFY_URL` (nothing when it is unset)."""
    from prefect.logging.loggers import flow_run_logger

    from flows.settings import PipelineSettings

    logger = flow_run_logger(flow_run, flow)
    try:
        # An unknown TDM_* variable fails the run, which is to be notified all the same.
        url = PipelineSettings.from_env(check_unknown=False).notify_url
    except Exception as error:  # a bad TDM_* value already failed the run; say why no POST
        logger.warning("No failure notification: the settings are invalid (%s)", error)
        return
    if not url:
        return
    try:
        post_json(url, failure_summary(flow, flow_run, state), timeout=NOTIFY_TIMEOUT_SECONDS)
    except Exception as error:  # the notification is best effort: the run's state stands
        logger.warning("The failure notification to %s was not delivered: %s", _host(url), error)
    else:
        logger.info("Failure notification sent to %s", _host(url))


def _host(url: str) -> str:
    """The scheme and host of `url`: a webhook's path often holds its secret token, and run
    logs are shown in the UI."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rsplit('@', 1)[-1]}/..."


def failure_summary(flow: Any, flow_run: Any, state: Any) -> dict[str, Any]:
    """What a failure notification says: flow, run, tables, warehouse, state, reason, link."""
    tags = _current_tags(flow_run)
    tables = [tag.removeprefix(TABLE_TAG) for tag in tags if tag.startswith(TABLE_TAG)]
    parameters = flow_run.parameters if isinstance(flow_run.parameters, dict) else {}
    if not tables and "source_table" in parameters:  # failed before the run was tagged
        tables = [str(parameters["source_table"])]
    warehouses = [t.removeprefix(WAREHOUSE_TAG) for t in tags if t.startswith(WAREHOUSE_TAG)]
    reason = _FOLDERS.sub(".../", str(state.message or state.name))
    url = _run_url(flow_run.id)
    text = f"{flow.name} run {flow_run.name!r} {str(state.name).lower()}: {reason}"
    return {
        "flow": flow.name,
        "flow_run": flow_run.name,
        "flow_run_id": str(flow_run.id),
        "state": state.name,
        "tables": tables,
        "warehouse": warehouses[0] if warehouses else None,
        "reason": reason,
        "url": url,
        "text": f"{text} {url}" if url else text,
    }


def check_notify_url(url: str) -> None:
    """Refuse (`ValueError`) a `TDM_NOTIFY_URL` that is not an http or https URL with a host;
    the message does not name its path, which may hold a token."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(
            f"TDM_NOTIFY_URL must be an http:// or https:// URL with a host, not "
            f"{parts.scheme or '(no scheme)'}://{parts.netloc}"
        )


def post_json(url: str, body: dict[str, Any], *, timeout: float) -> None:
    """POST `body` as JSON to `url` (http or https only, no redirect followed); raise when it is
    not accepted. No error names `url`'s path."""
    check_notify_url(url)
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode("utf-8"),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(request, timeout=timeout) as response:
            response.read()
    except urllib.error.HTTPError as error:
        raise OSError(f"HTTP {error.code} {error.reason}") from None


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Refuses every redirect: the body goes to the address the operator set, or nowhere."""

    def redirect_request(self, *args: Any) -> None:
        return None


def _current_tags(flow_run: Any) -> list[str]:
    """The run's tags as the server has them now (the flows add theirs while running); the
    hook's copy when the server cannot be asked."""
    try:
        from prefect.client.orchestration import get_client

        with get_client(sync_client=True) as client:
            return list(client.read_flow_run(flow_run.id).tags)
    except Exception:
        return list(flow_run.tags or [])


def _run_url(flow_run_id: Any) -> str | None:
    """The run's page in the Prefect UI, when the UI's address is known."""
    from prefect.settings import get_current_settings

    ui = get_current_settings().ui_url
    return f"{str(ui).rstrip('/')}/runs/flow-run/{flow_run_id}" if ui else None
