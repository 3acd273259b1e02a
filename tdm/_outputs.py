"""What the imputers hand back: the same type as their input, and the fingerprint by which
``transform`` recognises the data ``fit`` saw."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["fingerprint", "wrap_like"]


def fingerprint(values: np.ndarray) -> str:
    """A digest of ``values``' shape, dtype and bytes (equal arrays, equal digests)."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(str(values.shape).encode())
    digest.update(str(values.dtype).encode())
    digest.update(np.ascontiguousarray(values).tobytes())
    return digest.hexdigest()


def wrap_like(X: Any, out: np.ndarray) -> Any:
    """``out`` as ``X`` came: a DataFrame with ``X``'s index, columns and float dtypes when
    ``X`` is one, else the array itself."""
    if not isinstance(X, pd.DataFrame):
        return out
    frame = pd.DataFrame(out, index=X.index, columns=X.columns)
    for name, dtype in X.dtypes.items():
        if pd.api.types.is_float_dtype(dtype) and dtype != frame[name].dtype:
            frame[name] = frame[name].astype(dtype)
    return frame
