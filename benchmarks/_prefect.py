"""Prefect set-up shared by the benchmarks that time flows."""

from __future__ import annotations

import os


def start_prefect(torch_threads: int | None) -> None:
    """Set torch's threads (when given) and start Prefect's API with a no-op flow, so that the
    temporary server's start is not timed; analytics stay off."""
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    import torch
    from prefect import flow

    if torch_threads is not None:
        torch.set_num_threads(torch_threads)

    @flow(name="warm-up")
    def warm_up() -> None:
        """Start the Prefect API (temporary server) before timing."""

    warm_up()
