"""The logger of the pipeline's steps: the Prefect run's where there is one, so that every line a
step writes reaches the run's log (the UI, `tdm run`) as well as the terminal."""

from __future__ import annotations

import logging

__all__ = ["step_logger"]


def step_logger(name: str) -> logging.Logger | logging.LoggerAdapter[logging.Logger]:
    """The current flow or task run's logger; outside a run, the standard logger `name`."""
    from prefect import get_run_logger
    from prefect.exceptions import MissingContextError

    try:
        return get_run_logger()
    except MissingContextError:
        return logging.getLogger(name)
