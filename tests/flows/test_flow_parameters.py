"""The run form of the Prefect UI: every parameter of the two deployed flows is described."""

from __future__ import annotations

import inspect

import pytest
from prefect.utilities.callables import parameter_schema

from flows.impute_table import impute_table
from flows.impute_warehouse import impute_warehouse


@pytest.mark.parametrize("flow", [impute_table, impute_warehouse], ids=lambda f: f.name)
def test_every_parameter_has_a_description_in_the_deployment_schema(flow: object) -> None:
    """Bug: the UI's run form listed bare parameter names. Prefect reads the descriptions from
    the docstring's `Args:` section into the deployment's parameter_openapi_schema."""
    names = list(inspect.signature(flow.fn).parameters)  # type: ignore[attr-defined]
    for schema in (parameter_schema(flow.fn), flow.parameters):  # type: ignore[attr-defined]
        described = {
            name: str(spec.get("description") or "") for name, spec in schema.properties.items()
        }
        assert list(described) == names
        assert all(len(text.split()) >= 4 for text in described.values()), described
    assert "nothing is written" in described["dry_run"]
