"""Following a triggered run (`deployments.trigger`) when its server goes away."""

from __future__ import annotations

from uuid import uuid4

import httpx
import pytest

from deployments.trigger import CreatedRun, _Watch
from tasks.errors import PipelineError


class _GoneServer:
    """A Prefect client whose server stopped answering (its serving process was killed)."""

    def read_flow_run(self, run_id: object) -> object:
        raise httpx.ConnectError("[Errno 111] Connection refused")


def test_a_server_that_stops_answering_leaves_the_run_s_outcome_unknown_not_a_bug() -> None:
    """Bug: `tdm run` whose `tdm serve` was killed mid-run said "unexpected error:
    ConnectError ... This is a bug in tdm" (exit 1). It says the run's outcome is unknown and
    where to find it (exit 2: a `PipelineError`)."""
    run = CreatedRun(uuid4(), "impute-sales", "impute-table/impute-table", "http://ui/runs/1")
    watch = _Watch(_GoneServer(), run, uuid4(), None, None)  # type: ignore[arg-type]
    with pytest.raises(PipelineError) as raised:
        watch.follow(wait=True, timeout=None, pickup_timeout=30, poll=0.01)
    message = str(raised.value)
    assert "stopped answering (ConnectError) while run 'impute-sales' was going" in message
    assert "http://ui/runs/1" in message and f"run_id '{run.id}'" in message
