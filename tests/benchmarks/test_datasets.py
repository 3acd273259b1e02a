"""`benchmarks.datasets`: the paper's tables (standardised features, labels or none) and the
mixed-type tables (the benchmark's dtypes, column kinds, seeded masks over every column), read
from the shared files when present, else from small files written here; clear errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchmarks.datasets import (
    DATASETS,
    DATASETS_DIR_ENV,
    MIXED_DATASETS,
    MIXED_SAMPLE_ROWS,
    apply_mask,
    default_data_dir,
    encode_numeric,
    load_dataset,
    load_mixed_dataset,
    simulate_mixed,
)
from tdm.columns import column_kinds


def _write(path: Path, last: str = "label", n: int = 12, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(rng.normal(3.0, 2.0, size=(n, 3)), columns=["a", "b", "status"])
    frame[last] = rng.integers(0, 2, n) if last == "label" else rng.normal(size=n)
    frame.to_csv(path, index=False)
    return frame


def test_features_are_z_scored_and_labels_kept(tmp_path: Path) -> None:
    """Columns get mean 0 and population std 1; the label column is returned unchanged."""
    frame = _write(tmp_path / "toy.csv")
    data = load_dataset("toy", data_dir=tmp_path)
    raw = frame.iloc[:, :-1].to_numpy(float)
    expected = (raw - raw.mean(0)) / raw.std(0)
    np.testing.assert_allclose(data.X, expected, rtol=1e-12, atol=1e-12)
    assert data.X.dtype == np.float64
    assert data.task == "classification"
    np.testing.assert_array_equal(data.y, frame["label"].to_numpy())
    assert data.feature_names == ("a", "b", "status")
    assert data.classifier_features == (0, 1, 2)
    assert data.shape == (12, 3)


def test_target_means_regression_without_labels(tmp_path: Path) -> None:
    """A last column called `target` gives a regression dataset with y None."""
    _write(tmp_path / "reg.csv", last="target")
    data = load_dataset("reg", data_dir=tmp_path)
    assert data.task == "regression"
    assert data.y is None


def test_parkinsons_status_is_left_out_of_the_classifier(tmp_path: Path) -> None:
    """parkinsons' `status` copies the label: it stays a feature but not a classifier input."""
    _write(tmp_path / "parkinsons.csv")
    data = load_dataset("parkinsons", data_dir=tmp_path)
    assert data.X.shape[1] == 3
    assert data.classifier_features == (0, 1)


def test_env_var_names_the_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without data_dir, TDM_DATASETS_DIR is where the files are looked for."""
    _write(tmp_path / "toy.csv")
    monkeypatch.setenv(DATASETS_DIR_ENV, str(tmp_path))
    assert default_data_dir() == tmp_path
    assert load_dataset("toy").shape == (12, 3)


def test_missing_file_names_the_file_and_the_env_var(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"nothere\.csv.*TDM_DATASETS_DIR"):
        load_dataset("nothere", data_dir=tmp_path)


@pytest.mark.parametrize("name", ["", "../seeds", ".hidden"])
def test_names_must_be_plain_file_stems(name: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="file stem"):
        load_dataset(name, data_dir=tmp_path)


def test_last_column_must_be_label_or_target(tmp_path: Path) -> None:
    pd.DataFrame({"a": [1.0, 2.0], "b": [3.0, 4.0]}).to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(ValueError, match="'label' or 'target'"):
        load_dataset("bad", data_dir=tmp_path)


_SHARED = default_data_dir()


@pytest.mark.skipif(
    _SHARED is None or not (_SHARED / "seeds.csv").is_file(),
    reason="the shared dataset CSVs are not available (set TDM_DATASETS_DIR)",
)
@pytest.mark.parametrize(
    ("name", "shape", "task"),
    [
        ("concrete_slump", (103, 7), "regression"),
        ("parkinsons", (195, 23), "classification"),
        ("seeds", (210, 7), "classification"),
        ("glass", (214, 9), "classification"),
        ("blood_transfusion", (748, 4), "classification"),
    ],
)
def test_shared_files_match_the_paper_table(name: str, shape: tuple[int, int], task: str) -> None:
    """The small shipped datasets have the paper's N x D and are standardised."""
    assert name in DATASETS
    data = load_dataset(name)
    assert data.shape == shape
    assert data.task == task
    np.testing.assert_allclose(data.X.mean(0), 0.0, atol=1e-12)
    np.testing.assert_allclose(data.X.std(0), 1.0, rtol=1e-12)


# --------------------------------------------------------------------------------------------
# mixed-type tables
# --------------------------------------------------------------------------------------------
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
