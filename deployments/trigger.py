"""Trigger a run of a served deployment from any terminal (`tdm run`), and wait for it.

It talks to PREFECT_API_URL or, when unset, to the server `tdm serve` starts on this machine;
never to an ephemeral API, which would know no deployment.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast
from uuid import UUID

from deployments.server import DEFAULT_PORT, api_url_for, server_answers
from tasks.errors import PipelineError

if TYPE_CHECKING:
    from prefect.client.schemas.objects import FlowRun

__all__ = ["TABLE_DEPLOYMENT", "TriggeredRun", "target_api_url", "trigger_deployment"]

TABLE_DEPLOYMENT = "impute-table/impute-table"
"""The ad-hoc deployment: `<flow name>/<deployment name>`."""

REPORT_KEY_PREFIX = "tdm-report-"  # the run report artifacts the impute flows publish


@dataclass(frozen=True)
class TriggeredRun:
    """A flow run created from a deployment, as last seen."""

    id: UUID
    name: str
    deployment: str
    state: str
    message: str | None
    final: bool
    succeeded: bool
    url: str
    reports: tuple[str, ...]
    """Summaries (markdown) of the run's report artifacts, one per table."""


def target_api_url() -> str:
    """PREFECT_API_URL, else the API of the server `tdm serve` starts on this machine."""
    from prefect.settings import get_current_settings

    return get_current_settings().api.url or api_url_for(DEFAULT_PORT)


def trigger_deployment(
    name: str,
    parameters: dict[str, Any],
    *,
    wait: bool = True,
    api_url: str | None = None,
    poll_interval: float = 1.0,
) -> TriggeredRun:
    """Create a run of deployment `name` with `parameters`; with `wait`, until it ends.

    Errors (`PipelineError`) when no server answers, when the deployment does not exist or nothing
    serves it now, or when the server refuses the parameters.
    """
    from prefect.deployments import run_deployment
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
        if deployment.status != DeploymentStatus.READY:
            raise PipelineError(
                f"Nothing serves deployment {name!r} on {url} now (no runner or worker has "
                "polled it for a minute): start `tdm serve`, or a worker on its work pool."
            )
        try:
            flow_run = cast(
                "FlowRun",  # the sync call returns the run itself
                run_deployment(
                    name,
                    parameters=parameters,
                    timeout=None if wait else 0,
                    poll_interval=poll_interval,
                    as_subflow=False,
                ),
            )
        except PrefectHTTPStatusError as error:
            raise PipelineError(
                f"The Prefect server refused a run of {name!r} with {parameters}: {_detail(error)}"
            ) from None
        state = flow_run.state
        final = state is not None and state.is_final()
        succeeded = state is not None and state.is_completed()
        reports = _report_summaries(flow_run.id) if final else ()
    return TriggeredRun(
        id=flow_run.id,
        name=flow_run.name,
        deployment=name,
        state=(state.name or state.type.value) if state is not None else "Unknown",
        message=state.message if state is not None else None,
        final=final,
        succeeded=succeeded,
        url=f"{url.rstrip('/').removesuffix('/api')}/runs/flow-run/{flow_run.id}",
        reports=reports,
    )


def _report_summaries(flow_run_id: UUID) -> tuple[str, ...]:
    """The head of each report artifact of the run (its lines before the first table), by key."""
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
    summaries = []
    for artifact in artifacts:
        if not (artifact.key or "").startswith(REPORT_KEY_PREFIX) or not artifact.data:
            continue
        head = []
        for line in str(artifact.data).splitlines():
            if line.startswith("|"):
                break
            head.append(line)
        summaries.append("\n".join(head).strip())
    return tuple(summaries)


def _detail(error: Exception) -> str:
    response = getattr(error, "response", None)
    try:
        if response is None:
            return str(error)
        return str(response.json().get("detail", response.text))
    except ValueError:
        return str(error)
