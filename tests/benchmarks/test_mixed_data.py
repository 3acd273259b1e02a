"""The mixed-type tables: read with the benchmark's dtypes (the shared files when present, else
a small file written here), column kinds, and seeded masks over every column."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchmarks.datasets import default_data_dir
from benchmarks.mixed_data import (
    MIXED_DATASETS,
    MIXED_SAMPLE_ROWS,
    apply_mask,
    column_kinds,
    encode_numeric,
    load_mixed_dataset,
    simulate_mixed,
)

# rows, integer, float and categorical columns of the shared files (README of datasets/mixed/)
SHARED = {
    "penguins": (333, 1, 4, 3),
    "credit": (400, 6, 1, 4),
    "cps1985": (534, 3, 1, 7),
    "houseprices": (546, 6, 0, 6),
    "wage": (3_000, 2, 2, 6),
    "diamonds": (3_000, 1, 6, 3),
}


def _shared_dir() -> Path | None:
    folder = default_data_dir()
    if folder is None or not all((folder / "mixed" / f"{n}.csv").is_file() for n in SHARED):
        return None
    return folder


def _small_dir(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    n = 40
    frame = pd.DataFrame(
        {
            "species": rng.choice(["Adelie", "Gentoo"], n),
            "bill": rng.normal(40, 5, n).round(1),
            "year": rng.integers(2007, 2010, n),
            "sex": rng.choice(["male", "female"], n),
        }
    )
    (tmp_path / "mixed").mkdir()
    frame.to_csv(tmp_path / "mixed" / "penguins.csv", index=False)
    return tmp_path


def test_a_table_is_read_with_the_benchmarks_dtypes(tmp_path: Path) -> None:
    table = load_mixed_dataset("penguins", data_dir=_small_dir(tmp_path))
    assert table.frame.dtypes.astype(str).tolist() == ["category", "float64", "Int64", "category"]
    assert table.kinds == {
        "species": "categorical",
        "bill": "float",
        "year": "integer",
        "sex": "categorical",
    }
    assert list(table.frame["species"].cat.categories) == ["Adelie", "Gentoo"]
    assert table.shape == (40, 4) and table.n_rows_file == 40


@pytest.mark.parametrize("name", MIXED_DATASETS)
def test_shared_tables_match_their_readme(name: str) -> None:
    folder = _shared_dir()
    if folder is None:
        pytest.skip("the shared mixed-type tables are not here")
    table = load_mixed_dataset(name, data_dir=folder)
    rows, integer, floating, categorical = SHARED[name]
    kinds = list(table.kinds.values())
    assert table.shape[0] == rows
    assert (kinds.count("integer"), kinds.count("float"), kinds.count("categorical")) == (
        integer,
        floating,
        categorical,
    )
    assert not table.frame.isna().any().any()


def test_diamonds_is_one_seeded_sample() -> None:
    folder = _shared_dir()
    if folder is None:
        pytest.skip("the shared mixed-type tables are not here")
    first = load_mixed_dataset("diamonds", data_dir=folder)
    again = load_mixed_dataset("diamonds", data_dir=folder)
    assert first.n_rows_file == 53_940 and len(first.frame) == MIXED_SAMPLE_ROWS["diamonds"]
    pd.testing.assert_frame_equal(first.frame, again.frame)


def test_unknown_names_and_missing_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="one of the mixed-type tables"):
        load_mixed_dataset("seeds", data_dir=tmp_path)
    with pytest.raises(FileNotFoundError, match=r"TDM_DATASETS_DIR.*mixed/ holds credit\.csv"):
        load_mixed_dataset("credit", data_dir=tmp_path)


def _frame() -> pd.DataFrame:
    rng = np.random.default_rng(1)
    n = 300
    return pd.DataFrame(
        {
            "x": rng.standard_normal(n),
            "k": pd.array(rng.integers(0, 9, n), dtype="Int64"),
            "c": pd.Categorical(rng.choice(["a", "b", "c"], n)),
            "s": pd.array(rng.choice(["u", "v"], n), dtype="string"),
            "b": pd.array(rng.random(n) < 0.3, dtype="boolean"),
        }
    )


def test_column_kinds_and_the_numeric_encoding() -> None:
    frame = _frame()
    assert column_kinds(frame) == {
        "x": "float",
        "k": "integer",
        "c": "categorical",
        "s": "categorical",
        "b": "boolean",
    }
    X = encode_numeric(frame)
    np.testing.assert_array_equal(X[:, 0], frame["x"].to_numpy())
    np.testing.assert_array_equal(X[:, 2], frame["c"].cat.codes.to_numpy())  # sorted labels
    assert set(np.unique(X[:, 4])) <= {0.0, 1.0}
    with pytest.raises(TypeError, match="column 'when' has dtype"):
        column_kinds(frame.assign(when=pd.Timestamp("2024-01-01")))


@pytest.mark.parametrize("mechanism", ["mcar", "mar"])
def test_masks_are_seeded_and_hit_the_rate_over_every_column(mechanism: str) -> None:
    frame = _frame()
    mask = simulate_mixed(frame, mechanism, 0.3, random_state=4)
    np.testing.assert_array_equal(mask, simulate_mixed(frame, mechanism, 0.3, random_state=4))
    assert not np.array_equal(mask, simulate_mixed(frame, mechanism, 0.3, random_state=5))
    assert abs(mask.mean() - 0.3) < 0.04
    assert not mask.all(axis=0).any()
    if mechanism == "mar":
        assert (~mask.any(axis=0)).sum() == 1  # floor(0.3 * 5) driver column, fully observed
    else:
        assert mask.any(axis=0).all()
    with pytest.raises(ValueError, match="mechanism must be one of"):
        simulate_mixed(frame, "mnarl", 0.3, random_state=0)


def test_apply_mask_keeps_every_dtype() -> None:
    frame = _frame()
    mask = simulate_mixed(frame, "mcar", 0.3, random_state=0)
    out = apply_mask(frame, mask)
    assert out.dtypes.equals(frame.dtypes)
    np.testing.assert_array_equal(out.isna().to_numpy(), mask)
    with pytest.raises(ValueError, match="column 'n' has dtype int64, which cannot hold"):
        apply_mask(frame.assign(n=1), np.ones((len(frame), 6), dtype=bool))
