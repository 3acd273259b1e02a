"""A flow run's foreseen failure as a caller meets it, however Prefect's client delivered it.

A flow returns a Failed state holding the error (`flows.runs.fail_run`), and calling the flow
raises that error. When the client re-sends the state after losing the server's answer (the test
server's SQLite database, busy under load, answers 503 and the client retries), the state comes
back as the server holds it, without the error: calling the flow then raises Prefect's
`FailedRun` with the same message. The checks below accept either, and compare the message.
"""

from __future__ import annotations

from typing import Any

import pytest
from prefect.exceptions import FailedRun


def refused(error: type[BaseException], match: str | None = None) -> Any:
    """`pytest.raises` for a flow call that fails with `error`, or with `FailedRun` (above)."""
    return pytest.raises((error, FailedRun), match=match)


def held_error(state: Any, error: type[BaseException]) -> BaseException:
    """The error a failed run's `state` holds, asserted to be an `error`, or a `FailedRun`
    (above) whose message is the state's."""
    held = state.result(raise_on_failure=False)
    assert isinstance(held, (error, FailedRun)), held
    assert str(held) == str(state.message)
    return held
