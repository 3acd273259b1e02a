"""Trigger a run of a served deployment from any terminal (`tdm run`), and watch it.

It talks to PREFECT_API_URL or, when unset, to the server `tdm serve` starts on this machine;
never to an ephemeral API, which would know no deployment. A run that no runner or worker takes
up is cancelled rather than left to start whenever something serves the deployment again, and
so is a run still going when the caller's time limit passes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from uuid import UUID

from deployments.server import api_url_for, default_port, server_answers
from tasks.errors import PipelineError, WarehouseBusyError

if TYPE_CHECKING:
    from prefect.client.orchestration import SyncPrefectClient
    from prefect.client.schemas.objects import FlowRun, Log, State

__all__ = [
    "PICKUP_TIMEOUT",
    "TABLE_DEPLOYMENT",
    "CreatedRun",
    "TriggeredRun",
    "run_reports",
    "state_message",
    "target_api_url",
    "trigger_deployment",
]

TABLE_DEPLOYMENT = "impute-table/impute-table"
"""The ad-hoc deployment: `<flow name>/<deployment name>`."""

PICKUP_TIMEOUT = 30.0
"""Seconds a waiting run may go without its deployment being polled by a runner or worker, at
least: `tdm serve` polls every PREFECT_RUNNER_POLL_FREQUENCY seconds (10 by default), and the
wait is at least three of its polls (`pickup_seconds`)."""


def pickup_seconds() -> float:
    """How long a waiting run may go unpolled before `tdm run` says nothing serves it:
    `PICKUP_TIMEOUT`, or three of the runner's polls if they are slower."""
    from prefect.settings import get_current_settings

    poll = float(get_current_settings().runner.poll_frequency)
    return max(PICKUP_TIMEOUT, 3 * poll)


LOG_LAG = 30.0
"""Seconds before the newest log record seen that each read of a run's records goes back: a
record of another process may reach the API after newer ones (they are sent every 2 s)."""

LOG_PAGE = 200  # records per read (the API's default limit)

LOG_QUIET = 3.0
"""Seconds without a new record after which a run that has ended is taken to have logged all
(records reach the API every 2 s) ..."""
LOG_QUIET_FAILED = 8.0
"""... or, for a run that failed, after which its failure hook, which logs whether the
notification was delivered (in at most `flows.notify.NOTIFY_TIMEOUT_SECONDS`), has logged."""
LOG_SETTLE_MAX = 12.0
"""At most this long after the final state, the run's last records are waited for."""

REPORT_KEY_PREFIX = "tdm-report-"  # the run report artifacts the impute flows publish


@dataclass(frozen=True)
class CreatedRun:
    """A flow run just created from a deployment: what to show before waiting for it."""

    id: UUID
    name: str
    deployment: str
    url: str
    """Its page in the Prefect UI."""


@dataclass(frozen=True)
class TriggeredRun(CreatedRun):
    """A flow run created from a deployment, as last seen."""

    state: str
    message: str | None
    final: bool
    succeeded: bool
    reports: tuple[str, ...]
    """The run's report artifacts (markdown), one per table (`run_reports`)."""
    timed_out: bool = False
    """Whether the time limit passed first (the run was then cancelled)."""


def target_api_url() -> str:
    """PREFECT_API_URL, else the API of the server `tdm serve` starts on this machine."""
    from prefect.settings import get_current_settings

    return get_current_settings().api.url or api_url_for(default_port())


def _has_auth() -> bool:
    """Whether PREFECT_API_AUTH_STRING gives this client a login."""
    from prefect.settings import get_current_settings

    given = get_current_settings().api.auth_string
    return bool(given and given.get_secret_value())


def trigger_deployment(
    name: str,
    parameters: dict[str, Any],
    *,
    run_name: str | None = None,
    wait: bool = True,
    api_url: str | None = None,
    poll_interval: float = 1.0,
    timeout: float | None = None,
    pickup_timeout: float | None = None,
    on_created: Callable[[CreatedRun], None] | None = None,
    progress: Callable[[str], None] | None = None,
    on_log: Callable[[Log], None] | None = None,
) -> TriggeredRun:
    """Create a run of deployment `name` with `parameters` (named `run_name`; None: the server
    gives it a random name until the flow names it as it starts) and watch it.

    With `wait`, until it ends; without, until a runner or worker has taken it (or has seen it
    and queued it). `on_created` gets the run as soon as it exists; `progress` gets one line per
    state change (and when the run is queued); `on_log` gets each of the run's log records, in
    the order of their timestamps as they reach the API, while the run is watched. After
    `timeout` seconds the run is cancelled and returned with `timed_out`: a run in progress
    stops, one not yet started never will.

    Errors (`PipelineError`) when no server answers, when the deployment does not exist or nothing
    serves it (no runner or worker polls it within `pickup_timeout` seconds, default
    `pickup_seconds()`, while the run waits:
    the run is then cancelled, so that it cannot start later), or when the server refuses the
    parameters.
    """
    from prefect.exceptions import ObjectNotFound, PrefectHTTPStatusError
    from prefect.settings import PREFECT_API_URL, temporary_settings

    url = api_url or target_api_url()
    if not server_answers(url):
        raise PipelineError(
            f"No Prefect server answers at {url}: start one with `tdm serve` (it serves the "
            "deployments too), or point PREFECT_API_URL at yours."
        )
    with temporary_settings({PREFECT_API_URL: url}):
        from prefect import get_client
        from prefect.client.schemas.objects import DeploymentStatus

        with get_client(sync_client=True) as client:
            try:
                deployment = client.read_deployment_by_name(name)
            except ObjectNotFound:
                raise PipelineError(
                    f"The Prefect server at {url} has no deployment {name!r}: start `tdm serve` "
                    "(or deploy deployments/prefect.yaml to a work pool)."
                ) from None
            except PrefectHTTPStatusError as error:
                if error.response.status_code != 401:
                    raise
                raise PipelineError(
                    f"The Prefect server at {url} asks for a login, and "
                    f"{'PREFECT_API_AUTH_STRING is refused' if _has_auth() else 'none is set'}: "
                    "set PREFECT_API_AUTH_STRING=user:password as the server's "
                    "PREFECT_SERVER_API_AUTH_STRING."
                ) from None
            if deployment.status != DeploymentStatus.READY:
                raise PipelineError(
                    f"Nothing serves deployment {name!r} on {url} now (no runner or worker has "
                    "polled it for a minute): start `tdm serve`, or a worker on its work pool."
                )
            try:
                flow_run = client.create_flow_run_from_deployment(
                    deployment.id, parameters=parameters, name=run_name
                )
            except PrefectHTTPStatusError as error:
                raise PipelineError(
                    f"The Prefect server refused a run of {name!r} with {parameters}: "
                    f"{_detail(error)}"
                ) from None
            created = CreatedRun(
                flow_run.id,
                flow_run.name,
                name,
                f"{url.rstrip('/').removesuffix('/api')}/runs/flow-run/{flow_run.id}",
            )
            if on_created is not None:
                on_created(created)
            watch = _Watch(client, created, deployment.id, deployment.last_polled, progress, on_log)
            flow_run, timed_out = watch.follow(
                wait=wait,
                timeout=timeout,
                pickup_timeout=pickup_seconds() if pickup_timeout is None else pickup_timeout,
                poll=poll_interval,
            )
        state = flow_run.state
        final = state is not None and state.is_final()
        succeeded = state is not None and state.is_completed()
        reports = run_reports(flow_run.id) if final else ()
    return TriggeredRun(
        **vars(created),
        state=_state_name(state),
        message=state_message(state.message) if state is not None and state.message else None,
        final=final,
        succeeded=succeeded,
        reports=reports,
        timed_out=timed_out,
    )


class _Watch:
    """Follows one flow run's states, cancelling it when nothing serves it or time is up."""

    def __init__(
        self,
        client: SyncPrefectClient,
        run: CreatedRun,
        deployment_id: UUID,
        last_polled: datetime | None,
        progress: Callable[[str], None] | None,
        on_log: Callable[[Log], None] | None = None,
    ) -> None:
        self.client = client
        self.run = run
        self.deployment_id = deployment_id
        self.last_polled = last_polled
        self.progress = progress or (lambda line: None)
        self.on_log = on_log
        self.seen: tuple[str, str] | None = None
        self.logged: set[UUID] = set()
        self.logged_until: datetime | None = None

    def follow(
        self, *, wait: bool, timeout: float | None, pickup_timeout: float, poll: float
    ) -> tuple[FlowRun, bool]:
        """Poll until the run ends (or, without `wait`, is taken up); (last run, timed out).

        A server that stops answering meanwhile is a `PipelineError` saying that the run's
        outcome is unknown and where to find it."""
        import httpx

        try:
            return self._follow(
                wait=wait, timeout=timeout, pickup_timeout=pickup_timeout, poll=poll
            )
        except httpx.TransportError as error:
            raise PipelineError(
                f"The Prefect server stopped answering ({type(error).__name__}) while run "
                f"{self.run.name!r} was going (was `tdm serve` stopped?), so its outcome is not "
                f"known here. Once the server is back, its page says: {self.run.url}; a run that "
                f"wrote has a row in tdm_lineage with run_id '{self.run.id}'."
            ) from None

    def _follow(
        self, *, wait: bool, timeout: float | None, pickup_timeout: float, poll: float
    ) -> tuple[FlowRun, bool]:
        started = time.monotonic()
        polled_at = started  # when the deployment was last seen polled (as good as now)
        taken = queued = False
        while True:
            flow_run = self.client.read_flow_run(self.run.id)
            self._read_logs()
            self._report(flow_run.state)
            state = flow_run.state
            if state is not None and state.is_final():
                failed = state.is_failed() or state.is_crashed()
                self._settle_logs(poll, LOG_QUIET_FAILED if failed else LOG_QUIET)
                return flow_run, False
            now = time.monotonic()
            waiting = state is None or state.is_scheduled()
            taken = taken or not waiting
            if waiting and not taken and now - polled_at >= pickup_timeout:
                if not self._polled_again():
                    self._cancel("nothing serves its deployment")
                    raise PipelineError(
                        f"Nothing serves deployment {self.run.deployment!r}: no runner or worker "
                        f"polled it within {pickup_timeout:.0f} s, so run {self.run.name!r} was "
                        "cancelled (it will not start later). Start `tdm serve` (or a worker on "
                        "its work pool) and try again."
                    )
                polled_at = now
                if not queued:
                    queued = True
                    self.progress(f"{_clock()} queued: served, waiting for a free slot")
            if not wait and (taken or queued):
                return flow_run, False
            if timeout is not None and now - started >= timeout:
                self._cancel(f"tdm run: --timeout {timeout:g} s passed")
                flow_run = self.client.read_flow_run(self.run.id)
                state = flow_run.state  # it may have ended in the meantime, one way or another
                ended = state is not None and state.is_final() and not state.is_cancelled()
                return flow_run, not ended
            time.sleep(poll)

    def _report(self, state: State | None) -> None:
        key = (state.type.value, _state_name(state)) if state is not None else ("", "Unknown")
        if key == self.seen:
            return
        self.seen = key
        detail = f": {state_message(state.message)}" if state is not None and state.message else ""
        self.progress(f"{_clock()} {key[1]}{detail}")

    def _read_logs(self) -> None:
        """Pass on the run's log records not passed yet. Records reach the API in batches, from
        several processes, so each read goes back `LOG_LAG` seconds before the newest record
        seen and skips the records already passed."""
        if self.on_log is None:
            return
        from prefect.client.schemas.filters import (
            LogFilter,
            LogFilterFlowRunId,
            LogFilterTimestamp,
        )

        after = self.logged_until - timedelta(seconds=LOG_LAG) if self.logged_until else None
        wanted = LogFilter(
            flow_run_id=LogFilterFlowRunId(any_=[self.run.id]),
            timestamp=LogFilterTimestamp(after_=after),
        )
        offset = 0
        while True:
            page = self.client.read_logs(log_filter=wanted, limit=LOG_PAGE, offset=offset)
            for log in page:
                if log.id in self.logged:
                    continue
                self.logged.add(log.id)
                self.logged_until = max(self.logged_until or log.timestamp, log.timestamp)
                self.on_log(log)
            if len(page) < LOG_PAGE:
                return
            offset += LOG_PAGE

    def _settle_logs(self, poll: float, quiet: float) -> None:
        """Pass on the records an ended run logs after its final state (its failure hook's,
        the last batch): read until none came for `quiet` s, for `LOG_SETTLE_MAX` s at most."""
        if self.on_log is None:
            return
        started = last_new = time.monotonic()
        while True:
            seen = len(self.logged)
            self._read_logs()
            now = time.monotonic()
            if len(self.logged) > seen:
                last_new = now
            if now - last_new >= quiet or now - started >= LOG_SETTLE_MAX:
                return
            time.sleep(max(poll, 0.5))

    def _polled_again(self) -> bool:
        """Whether a runner or worker polled the deployment since last checked."""
        polled = self.client.read_deployment(self.deployment_id).last_polled
        if polled is None or (self.last_polled is not None and polled <= self.last_polled):
            return False
        self.last_polled = polled
        return True

    def _cancel(self, reason: str) -> None:
        """Cancel the run: one not started goes to Cancelled, a running one is stopped by its
        runner (Cancelling, then Cancelled). The reason is logged on the run once the server took
        the cancel: it keeps no message of the Cancelling state once the run is Cancelled."""
        from prefect.client.schemas.actions import LogCreate
        from prefect.client.schemas.objects import State, StateType
        from prefect.client.schemas.responses import SetStateStatus

        asked = self.client.set_flow_run_state(
            self.run.id, State(type=StateType.CANCELLING, message=reason)
        )
        now = asked.state.type if asked.state is not None else None
        # a run not started yet is set Cancelled straight away (the Cancelling state rejected)
        if asked.status == SetStateStatus.ACCEPT or now in (
            StateType.CANCELLING,
            StateType.CANCELLED,
        ):
            record = LogCreate(
                name="tdm.run",
                level=logging.WARNING,
                message=f"Cancelled: {reason}.",
                timestamp=datetime.now(UTC),
                flow_run_id=self.run.id,
            )
            self.client.create_logs([record])
        self._report(self.client.read_flow_run(self.run.id).state)


def _state_name(state: State | None) -> str:
    return (state.name or state.type.value) if state is not None else "Unknown"


_RAISED_BUSY = f"Flow run encountered an exception: {WarehouseBusyError.__name__}: "
"""How Prefect begins the message of the state a locked warehouse ends an attempt in: the one
foreseen error a flow raises (for the run's retries) rather than returns as its Failed state."""


def state_message(message: str) -> str:
    """A state's `message` as `tdm run` prints it: a locked warehouse's in its own words, without
    Prefect's preamble and the error's class name; any other message as it is."""
    return message.removeprefix(_RAISED_BUSY)


def _clock() -> str:
    return datetime.now().strftime("%H:%M:%S")


def run_reports(flow_run_id: UUID) -> tuple[str, ...]:
    """The report artifacts (markdown) of a flow run on the current API, by key: one per table
    the run wrote."""
    from prefect import get_client
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterType,
        FlowRunFilter,
        FlowRunFilterId,
    )
    from prefect.client.schemas.sorting import ArtifactSort

    with get_client(sync_client=True) as client:
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(type=ArtifactFilterType(any_=["markdown"])),
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])),
            sort=ArtifactSort.KEY_ASC,
        )
    return tuple(
        str(artifact.data).strip()
        for artifact in artifacts
        if (artifact.key or "").startswith(REPORT_KEY_PREFIX) and artifact.data
    )


def _detail(error: Exception) -> str:
    response = getattr(error, "response", None)
    try:
        if response is None:
            return str(error)
        return str(response.json().get("detail", response.text))
    except ValueError:
        return str(error)
