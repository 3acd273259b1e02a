"""`benchmarks.datasets.load_dataset`: standardised features, labels or none, clear errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchmarks.datasets import DATASETS, DATASETS_DIR_ENV, default_data_dir, load_dataset


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
