"""The model store's pieces that need no flow (`tasks.warehouse.models`)."""

from __future__ import annotations

import json

import numpy as np

from tasks.scaling import Scaling
from tasks.warehouse.models import scaling_from_json, scaling_to_json
from tdm.scaling import ColumnScaling


def test_scaling_survives_json_with_open_bounds() -> None:
    """Means, scales, order, kinds and bounds (an infinite end as null) come back as stored."""
    scaling = Scaling(
        columns=("a", "b"),
        statistics=ColumnScaling(mean=np.array([1.5, -2.0]), scale=np.array([0.1, 3.0])),
        order=("a", "s", "b"),
        kinds={"a": "float", "s": "categorical", "b": "integer"},
        bounds={"a": (-np.inf, 4.0), "b": (0.0, np.inf)},
    )
    back = scaling_from_json(json.loads(json.dumps(scaling_to_json(scaling))))
    assert back.columns == scaling.columns and back.order == scaling.order
    assert dict(back.kinds) == dict(scaling.kinds)
    np.testing.assert_array_equal(back.statistics.mean, scaling.statistics.mean)
    np.testing.assert_array_equal(back.statistics.scale, scaling.statistics.scale)
    assert dict(back.bounds) == {"a": (-np.inf, 4.0), "b": (0.0, np.inf)}
