"""Prefect deployments: schedules, parameters and work pools (see prefect.yaml)."""
