"""Mixed-type DataFrames: every column comes back in its own dtype, imputed labels were observed,
integers are integral and numeric values are within their bounds (property-style, over random
frames), and the categorical imputation learns from the other columns."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pandas as pd
import pytest

from tdm import OTImputer, TDMImputer
from tdm._mixed import MAX_EMBEDDING_DIM, TableEncoding, label_embedding

FAST = {"max_iter": 40, "batch_size": 32, "init": "mean"}  # the default start: test_starts


def random_mixed_frame(seed: int, n: int = 80) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A frame of every supported column kind, correlated through a latent factor, and the same
    frame with about 30% of every column missing (each column keeps an observed value)."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=n)
    n_labels = int(rng.integers(2, 9))
    edges = np.quantile(z, np.linspace(0, 1, n_labels + 1)[1:-1])
    words = np.array([f"w{k}" for k in range(n_labels)], dtype=object)
    full = pd.DataFrame(
        {
            "f64": z + 0.1 * rng.normal(size=n),
            "f32": (np.exp(z) * 10).astype(np.float32),  # positive: bounded below by its min
            "int64": pd.array(np.round(30 + 10 * z).astype(np.int64), dtype="Int64"),
            "uint8": pd.array(np.clip(np.round(5 + 2 * z), 0, 255).astype(np.uint8), "UInt8"),
            "flag": pd.array(z > 0, dtype="boolean"),
            "text": words[np.digitize(z, edges)],
            "string": pd.array(np.where(z > 0.5, "hi", "lo"), dtype="string"),
            "cat": pd.Categorical(
                np.where(z > 0, "up", "down"), categories=["down", "up", "never"]
            ),
            "obj_bool": np.where(rng.random(n) < 0.5, True, False).astype(object),
        }
    )
    holes = full.copy()
    mask = rng.random(full.shape) < 0.3
    mask[0] = False
    for j, name in enumerate(full.columns):
        holes.loc[mask[:, j], name] = None
    return full, holes


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("method", ["transform", "project", "clip"])
def test_random_mixed_frames_keep_types_labels_integers_and_bounds(seed: int, method: str) -> None:
    _, holes = random_mixed_frame(seed)
    imputer = TDMImputer._configured(**FAST, bounds_method=method, random_state=seed)
    out = imputer.fit_transform(holes)
    assert list(out.columns) == list(holes.columns)
    assert out.index.equals(holes.index)
    assert out.dtypes.to_dict() == holes.dtypes.to_dict()
    assert not out.isna().any().any()
    observed = holes.notna()
    for name in holes.columns:
        kept = out[name][observed[name]]
        assert kept.equals(holes[name][observed[name]]), name
        imputed = out[name][~observed[name]]
        kind = imputer.column_kinds_[name]
        if kind in ("categorical", "boolean"):
            seen = set(holes[name].dropna())
            assert set(imputed) <= seen, name
        else:
            low, high = imputer.bounds_[name]
            values = imputed.to_numpy(dtype=np.float64)
            assert (values >= low).all() and (values <= high).all(), name
            assert low == holes[name].min() and high == holes[name].max(), name
            if kind == "integer":
                assert (values == np.round(values)).all(), name


def test_category_dtype_keeps_its_categories_and_never_imputes_an_unobserved_one() -> None:
    _, holes = random_mixed_frame(1)
    out = TDMImputer(**FAST, random_state=0).fit_transform(holes)
    assert list(out["cat"].cat.categories) == ["down", "up", "never"]
    assert "never" not in set(out["cat"])


@pytest.mark.parametrize(
    ("bounds", "margin", "expect"),
    [
        ({"f64": (0.0, None)}, 0.0, (0.0, np.inf)),
        ({"f64": (None, 0.5)}, 0.0, (-np.inf, 0.5)),
        (None, 0.0, (-np.inf, np.inf)),
    ],
)
def test_bounds_given_per_column_or_switched_off(bounds, margin, expect) -> None:
    _, holes = random_mixed_frame(2)
    imputer = TDMImputer._configured(**FAST, bounds=bounds, bounds_margin=margin, random_state=0)
    out = imputer.fit_transform(holes)
    assert imputer.bounds_["f64"] == expect
    imputed = out["f64"][holes["f64"].isna()].to_numpy()
    assert (imputed >= expect[0]).all() and (imputed <= expect[1]).all()


def test_the_margin_widens_the_observed_range() -> None:
    _, holes = random_mixed_frame(3)
    imputer = TDMImputer._configured(**FAST, bounds_margin=0.5, random_state=0).fit(holes)
    low, high = holes["f64"].min(), holes["f64"].max()
    span = high - low
    np.testing.assert_allclose(imputer.bounds_["f64"], (low - 0.5 * span, high + 0.5 * span))


def test_bounds_hold_on_numpy_input_and_in_transform() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 4))
    X[rng.random(X.shape) < 0.3] = np.nan
    X[0] = 0.0
    imputer = TDMImputer(**FAST, bounds={1: (-0.1, 0.1)}, random_state=0)
    out = imputer.fit_transform(X)
    assert (np.abs(out[np.isnan(X[:, 1]), 1]) <= 0.1).all()
    new = rng.normal(size=(10, 4)) * 5
    new[:, 1] = np.nan
    assert (np.abs(imputer.transform(new)[:, 1]) <= 0.1).all()


@pytest.mark.parametrize("dtype", ["Int64", "UInt64", "int64[pyarrow]"])
def test_integers_at_the_top_of_their_type_are_imputed_within_it(dtype: str) -> None:
    """Bug: a column holding 2**63 - 1 failed with pandas' "cannot safely cast": the observed
    maximum, as a double, is 2**63, past the type. Imputed cells are the double below it."""
    if dtype.endswith("[pyarrow]"):
        pytest.importorskip("pyarrow")  # not a dependency of the library
    rng = np.random.default_rng(0)
    top = int(np.iinfo(np.dtype(dtype.lower().removesuffix("[pyarrow]"))).max)
    column = pd.array([top - int(v) for v in rng.integers(0, 5, size=60)], dtype=dtype)
    holes = pd.DataFrame({"a": rng.normal(size=60), "b": column})
    holes.loc[::4, "b"] = None
    out = TDMImputer(**FAST, random_state=0).fit_transform(holes)
    assert out["b"].dtype == holes["b"].dtype
    observed = holes["b"].notna()
    assert out["b"][observed].tolist() == holes["b"][observed].tolist()
    assert out["b"][~observed].between(top - 2048, top).all()


@pytest.mark.parametrize("frame", [True, "Float32", False])
def test_single_precision_cells_at_a_bound_stay_within_it(frame: bool | str) -> None:
    """0.05 has no single-precision double: a cell clamped to it is the single just inside."""
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.normal(size=80), rng.random(80) * 0.1]).astype(np.float32)
    X[::3, 1] = np.nan
    data = pd.DataFrame(X, columns=["a", "f"]) if frame else X
    if frame == "Float32":  # pandas' masked single precision
        data = data.astype({"f": "Float32"})
    column = "f" if frame else 1
    imputer = TDMImputer.paper(max_iter=50, bounds={column: (None, 0.05)}, random_state=0)
    out = np.asarray(imputer.fit_transform(data), dtype=np.float32)
    assert imputer.bounds_[column] == (-np.inf, 0.05)
    imputed = out[np.isnan(X[:, 1]), 1]
    assert imputed.dtype == np.float32
    assert imputed.astype(np.float64).max() == np.nextafter(np.float32(0.05), np.float32(0))


def test_half_precision_cells_stay_within_their_bounds_and_impossible_ones_are_refused() -> None:
    """Bug: a float16 column's cells were clamped as doubles, then rounded out of the bounds
    (0.0999755859375 < 0.1); and bounds that hold no number of a column's precision were
    met with a cell outside them, where an integer column's are refused."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.normal(size=60), "h": rng.random(60).astype(np.float16)})
    frame.loc[::3, "h"] = np.nan
    # 65504 is the largest half: bug, an open upper end above it gave infinite cells
    for low, high, scale in ((0.1, 0.1001, 1.0), (65500.0, None, 65000.0)):
        data = frame.assign(h=(frame["h"] * scale).astype(np.float16))
        imputer = TDMImputer(**FAST, bounds={"h": (low, high)}, random_state=0)
        out = imputer.fit_transform(data)
        imputed = out.loc[frame["h"].isna(), "h"].astype(np.float64)
        assert out["h"].dtype == np.float16
        assert ((imputed >= low) & (imputed <= (high or 65504.0))).all()

    single = frame.astype({"h": np.float32})
    array = single.to_numpy(dtype=np.float32)  # a half-precision array is read as double
    cases = [
        (frame, "h", (0.1000000001, 0.1000000002), "float16"),
        (frame, "h", (70000.0, None), "float16"),
        (single, "h", (0.1000000001, 0.1000000002), "float32"),
        (array, 1, (0.1000000001, 0.1000000002), "float32"),
    ]
    for data, column, bounds, precision in cases:
        narrow = TDMImputer(**FAST, bounds={column: bounds})
        with pytest.raises(ValueError, match=f"holds no finite {precision} number"):
            narrow.fit(data)


def test_label_columns_unlikely_meant_as_labels_are_warned_of_and_others_are_not() -> None:
    """Bug: an object column of numbers (as JSON or a database driver gives) was imputed as
    labels, and an identifier column's missing cells copied other rows' ids, both silently."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.normal(size=40)})
    numbers = frame.assign(s=pd.Series(rng.normal(size=40).round(3), dtype=object))
    ids = frame.assign(s=[f"id-{k}" for k in range(40)])
    cases = {"'s' has dtype object and holds only numbers": numbers, "'s' looks like an id": ids}
    for message, data in cases.items():
        data.loc[::4, "s"] = None
        for call in ("fit", "fit_transform"):  # bug: fit_transform's pointed into scikit-learn
            with pytest.warns(UserWarning, match=message) as caught:
                getattr(TDMImputer(**FAST, random_state=0), call)(data)
            assert [w.filename for w in caught] == [__file__]
    _, holes = random_mixed_frame(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        TDMImputer(**FAST, random_state=0).fit(holes)


def test_an_array_for_an_imputer_fitted_on_a_frame_is_refused_with_the_library_s_message() -> None:
    """Bug: an array given to an imputer fitted on a frame with a label column failed with
    NumPy's "could not convert string to float", after scikit-learn's feature-name warning."""
    _, holes = random_mixed_frame(0)
    imputer = TDMImputer(**FAST, random_state=0).fit(holes)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for call in (imputer.transform, lambda X: imputer.sample(X, n_draws=2)):
            with pytest.raises(ValueError, match="fitted on a DataFrame; pass a DataFrame"):
                call(holes.to_numpy())


@pytest.mark.parametrize(
    ("bounds", "match"),
    [
        ({"nope": (0, 1)}, "bounds names column 'nope'"),
        ({"text": (0, 1)}, "'text', which is categorical"),
        ({"flag": (0, 1)}, "'flag', which is boolean"),
        ({"f64": (2, 1)}, "is not an interval"),
        ({"f64": 3}, "must be a pair"),
        ({"f64": (np.inf, np.inf)}, r"bounds\['f64'\] = \(inf, inf\) holds no number"),
        ({"f64": (None, -np.inf)}, "holds no number; an open end is None"),
        ({"int64": (30.2, 30.8)}, r"bounds\['int64'\] = \(30.2, 30.8\) holds no integer"),
        ("wide", "bounds must be 'observed', None or a dict"),
    ],
)
def test_bad_bounds_are_refused_naming_the_column(bounds, match) -> None:
    _, holes = random_mixed_frame(0)
    with pytest.raises(ValueError, match=match):
        TDMImputer(**FAST, bounds=bounds).fit(holes)


def test_categorical_imputation_beats_the_mode_and_numeric_beats_the_mean() -> None:
    """The labels follow the numeric columns they depend on (the imputation uses them)."""
    full, holes = random_mixed_frame(4, n=300)
    out = TDMImputer(max_iter=300, random_state=0).fit_transform(holes)
    for name in ("text", "string", "cat", "flag"):
        missing = holes[name].isna()
        error = (out[name][missing].astype(str) != full[name][missing].astype(str)).mean()
        mode = holes[name].mode()[0]
        mode_error = (full[name][missing].astype(str) != str(mode)).mean()
        assert error < 0.8 * mode_error, name
    missing = holes["f64"].isna()
    error = np.abs(out["f64"][missing] - full["f64"][missing]).mean()
    assert error < 0.8 * np.abs(holes["f64"].mean() - full["f64"][missing]).mean()


def _many_labels(n_labels: int, seed: int) -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray]:
    """A label column of `n_labels` labels, consecutive bins of a numeric column (plus noise),
    a quarter of its cells removed; and two numeric columns."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(800, 2))
    bins = np.floor((z[:, 0] + rng.normal(scale=0.3, size=800) + 2.5) / 5 * n_labels)
    codes = np.clip(bins, 0, n_labels - 1).astype(int)
    full = pd.DataFrame(
        {"x": z[:, 0], "y": z[:, 1], "label": np.array([f"L{c:03d}" for c in codes], dtype=object)}
    )
    missing = rng.random(800) < 0.25
    holes = full.copy()
    holes.loc[missing, "label"] = None
    return full, holes, missing


@pytest.mark.parametrize("init", ["auto", "ice", "trees", "mean"])
def test_a_column_of_more_labels_than_coordinates_keeps_its_start_s_labels(init: str) -> None:
    """Bug: among more labels than the column has coordinates (their points projected), cells
    were decoded to the labels nearest the points' centre: 12 labels following a numeric
    column were imputed right 6-9% of the time (the mode: 18%), one rare label taking most
    cells. They now keep their start's label (the classifier's; the mean start: the mode), in
    `fit_transform` and in `transform` of new rows."""
    full, holes, missing = _many_labels(12, seed=0)
    assert TableEncoding.from_frame(holes, "t").columns[2].many_labels
    imputer = TDMImputer(init=init, max_iter=40, random_state=0)
    out = imputer.fit_transform(holes.iloc[:600])
    new = imputer.transform(holes.iloc[600:])
    mode = holes["label"].mode()[0]
    for got, rows in ((out, slice(0, 600)), (new, slice(600, 800))):
        cells = missing[rows]
        right = (got["label"][cells] == full["label"].iloc[rows][cells]).mean()
        by_mode = (full["label"].iloc[rows][cells] == mode).mean()
        if init == "mean":
            assert (got["label"][cells] == mode).all()
        else:
            assert right > 2 * by_mode


def test_transform_of_new_rows_and_unseen_labels() -> None:
    """New rows are imputed in their dtypes; a label not seen in fit is observed, kept as is."""
    _, holes = random_mixed_frame(5, n=120)
    imputer = TDMImputer(**FAST, random_state=0).fit(holes)
    new = holes.iloc[:20].copy()
    new.loc[new.index[0], "text"] = "brand-new"
    new.loc[new.index[1:6], "text"] = None
    out = imputer.transform(new)
    assert out.dtypes.to_dict() == new.dtypes.to_dict()
    assert out.loc[new.index[0], "text"] == "brand-new"
    assert set(out["text"].iloc[1:6]) <= set(imputer.categories_["text"])
    assert not out.isna().any().any()


def test_transform_of_the_fitted_frame_is_the_fit_imputation() -> None:
    _, holes = random_mixed_frame(0)
    imputer = TDMImputer(**FAST, random_state=0)
    first = imputer.fit_transform(holes)
    pd.testing.assert_frame_equal(imputer.transform(holes), first)


def test_a_frame_of_another_column_kind_is_refused_in_transform() -> None:
    _, holes = random_mixed_frame(0)
    imputer = TDMImputer(**FAST, random_state=0).fit(holes)
    changed = holes.assign(text=np.arange(len(holes), dtype=float))
    with pytest.raises(ValueError, match="column 'text' was categorical in fit"):
        imputer.transform(changed)


def test_new_rows_of_a_category_lacking_an_imputed_label_get_that_label() -> None:
    """Bug: new rows whose categorical dtype lacked the label imputed for a cell (a small batch
    built from the labels it holds) came back with that cell missing, without a word. The
    category gains the label; an ordered one, whose order cannot be guessed, is refused."""
    rng = np.random.default_rng(0)
    f = rng.normal(size=100)
    frame = pd.DataFrame({"f": f, "c": pd.Categorical(np.where(f > 0, "y", "x"))})
    frame.loc[::5, "c"] = None
    imputer = TDMImputer(**FAST, random_state=0).fit(frame)
    new = pd.DataFrame({"f": [2.0, 2.5, -2.0], "c": pd.Categorical(["x", None, None])})
    out = imputer.transform(new)
    assert out["c"].tolist() == ["x", "y", "x"]
    assert list(out["c"].cat.categories) == ["x", "y"] and not out["c"].cat.ordered
    ordered = TDMImputer(**FAST, random_state=0).fit(frame.assign(c=frame["c"].cat.as_ordered()))
    lacking = new.assign(c=pd.Categorical(["x", None, None], categories=["x"], ordered=True))
    with pytest.raises(ValueError, match=r"column 'c' is an ordered category without .*'y'"):
        ordered.transform(lacking)


@pytest.mark.parametrize("names", [[2, 1, 0], [5, 6, 7]], ids=["reordered", "renamed"])
def test_new_rows_with_other_column_names_of_any_type_are_refused(names: list[int]) -> None:
    """Bug: scikit-learn checks string column names only, so a frame of integer names,
    reordered or renamed, was imputed by position with another column's model and bounds."""
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(50, 3)) * [1.0, 10.0, 100.0])
    X.iloc[::4, 0] = np.nan
    imputer = TDMImputer(**FAST, random_state=0).fit(X)
    with pytest.raises(ValueError, match=r"(not those seen in fit|another order).*\[0, 1, 2\]"):
        imputer.transform(X[[2, 1, 0]].set_axis(names, axis=1))


@pytest.mark.parametrize("names", [[0, 1, 2], ["a", "b", "c"]], ids=["int-names", "str-names"])
def test_new_rows_with_the_fitted_columns_in_another_order_are_told_how_to_reorder(
    names: list[int | str],
) -> None:
    """New rows with the fitted columns in another order are refused, as scikit-learn's
    contract says, by transform and sample alike, with the selection that puts them in order;
    a column ``"1"`` is not a column ``1``."""
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(50, 3)), columns=names)
    X.iloc[::4, 0] = np.nan
    imputer = TDMImputer(**FAST, random_state=0).fit(X)
    shuffled = X[[names[2], names[0], names[1]]]
    hint = re.escape(f"another order; pass X[{names!r}]")
    with pytest.raises(ValueError, match=hint):
        imputer.transform(shuffled)
    with pytest.raises(ValueError, match=hint):
        imputer.sample(shuffled, n_draws=2, random_state=0)
    pd.testing.assert_frame_equal(imputer.transform(shuffled[names]), imputer.transform(X))
    if isinstance(names[0], int):
        with pytest.raises(ValueError, match="not those seen in fit"):
            imputer.transform(X.set_axis([str(name) for name in names], axis=1))


def test_a_complete_integer_column_with_gaps_in_new_rows_is_refused_with_the_dtype_to_use() -> None:
    """An int64 or bool column complete in fit becomes float64 or object in pandas once a new
    row has a gap there; the refusal says which nullable dtype keeps its kind."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"i": rng.integers(0, 5, 60), "b": rng.random(60) < 0.5})
    frame["f"] = rng.normal(size=60)
    imputer = TDMImputer(**FAST, random_state=0).fit(frame)
    with pytest.raises(ValueError, match=r"'i' was integer in fit.*give it the dtype 'Int64'"):
        imputer.transform(frame.assign(i=frame["i"].where(frame["f"] > 0)))
    with pytest.raises(ValueError, match=r"'b' was boolean in fit.*give it the dtype 'boolean'"):
        imputer.transform(frame.assign(b=frame["b"].where(frame["f"] > 0)))
    out = imputer.transform(
        frame.astype({"i": "Int64"}).assign(i=lambda t: t["i"].where(t["f"] > 0))
    )
    assert out["i"].dtype == "Int64" and not out["i"].isna().any()


def test_whole_numbers_of_a_float_column_in_new_rows_come_back_as_given() -> None:
    """Bug: one new record built from a dict (``{"age": 34}``) gives an int64 column where fit
    saw floats, and ``transform`` refused it. Integers with nothing missing are taken and come
    back bit for bit in their dtype, the other columns imputed as from floats; an integer column
    with a missing cell is refused, saying to give it a float dtype."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"age": rng.normal(40.0, 9.0, 60).round(), "income": rng.normal(size=60)})
    frame.loc[::5, "age"] = np.nan
    frame.loc[1::7, "income"] = np.nan
    imputer = TDMImputer(**FAST, random_state=0).fit(frame)
    record = pd.DataFrame([{"age": 34, "income": np.nan}, {"age": 51, "income": np.nan}])
    out = imputer.transform(record)
    as_floats = imputer.transform(record.astype({"age": "float64"}))
    assert out["age"].dtype == np.int64 and out["age"].tolist() == [34, 51]
    assert out["income"].equals(as_floats["income"])
    gap = pd.DataFrame({"age": pd.array([34, None], dtype="Int64"), "income": [0.1, 0.2]})
    with pytest.raises(ValueError, match=r"'age' was float in fit.*give it a float dtype"):
        imputer.transform(gap)


def test_early_stopping_and_otimputer_take_mixed_frames() -> None:
    _, holes = random_mixed_frame(1, n=120)
    tdm = TDMImputer._configured(**FAST, early_stopping=True, n_iter_no_change=25, random_state=0)
    ot = OTImputer(max_iter=FAST["max_iter"], batch_size=FAST["batch_size"], random_state=0)
    for imputer in (tdm, ot):
        out = imputer.fit_transform(holes)
        assert out.dtypes.to_dict() == holes.dtypes.to_dict()
        assert not out.isna().any().any()


def test_save_and_load_keep_the_encoding(tmp_path) -> None:
    _, holes = random_mixed_frame(2)
    imputer = TDMImputer(**FAST, random_state=0).fit(holes)
    imputer.save(tmp_path / "mixed.pt")
    loaded = TDMImputer.load(tmp_path / "mixed.pt")
    assert loaded.column_kinds_ == imputer.column_kinds_
    assert loaded.bounds_ == imputer.bounds_
    pd.testing.assert_frame_equal(loaded.transform(holes), imputer.transform(holes))


@pytest.mark.parametrize("n_labels", [1, 2, 3, 4, 9, 10, 50, 300])
def test_label_points_are_distinct_and_at_one_hot_distances(n_labels: int) -> None:
    points = label_embedding(n_labels)
    assert points.shape == (n_labels, min(max(n_labels - 1, 1), MAX_EMBEDDING_DIM))
    if n_labels < 2:
        return
    squared = ((points[:, None] - points[None]) ** 2).sum(-1)
    off = squared[~np.eye(n_labels, dtype=bool)]
    assert off.min() > 0
    np.testing.assert_allclose(off.mean(), 2.0)  # as one-hot vectors: sqrt(2) apart
    if n_labels <= MAX_EMBEDDING_DIM + 1:  # a regular simplex: all at the one-hot distance
        np.testing.assert_allclose(off, 2.0)


def test_many_labels_cost_memory_in_proportion_to_them(monkeypatch) -> None:
    """Bug: a column of 20,000 labels (names, say) needed a 20,000 x 20,000 matrix for its
    points and a rows x 8 x labels array to decode them, and the process was killed for
    memory. The points come in linear time; the distances are computed a block of rows at a
    time, exactly as the whole array gives them."""
    from tdm import _mixed
    from tdm._mixed import TableEncoding, label_distances

    assert label_embedding(200_000).shape == (200_000, MAX_EMBEDDING_DIM)  # eye(): 320 GB
    encoding = TableEncoding.from_frame(pd.DataFrame({"c": [f"l{i}" for i in range(30)]}), "t")
    embedding = encoding.columns[0].embedding
    points = np.random.default_rng(0).normal(size=(50, MAX_EMBEDDING_DIM))
    whole = ((points[:, :, None] - embedding.T[None]) ** 2).sum(axis=1)
    monkeypatch.setattr(_mixed, "LABEL_CHUNK", embedding.size * 7)  # seven rows a block
    np.testing.assert_array_equal(label_distances(points, embedding), whole)
    codes = encoding.decode_labels(np.vstack([embedding, points]))[0]
    np.testing.assert_array_equal(codes, np.concatenate([np.arange(30), whole.argmin(axis=1)]))


@pytest.mark.parametrize("case", ["repeated-name", "sparse", "lists"])
def test_frames_the_imputer_cannot_read_are_refused_naming_the_column(case: str) -> None:
    """Bug: a repeated column name, a sparse column or a column of lists failed in narwhals or
    pandas (DuplicateError, 'SparseArray does not support item assignment', 'unhashable type')."""
    frame = pd.DataFrame({"a": np.r_[np.nan, np.arange(59.0)], "b": np.arange(60.0)})
    bad, message = {
        "repeated-name": (pd.concat([frame, frame[["a"]]], axis=1), "'a' is repeated"),
        "sparse": (frame.astype({"b": pd.SparseDtype(float)}), "column 'b' has dtype Sparse"),
        "lists": (
            frame.assign(l=pd.Series([[1], [2], None] * 20, dtype=object)),
            r"column 'l' holds values that cannot be labels \(such as \[1\]\)",
        ),
    }[case]
    with pytest.raises(ValueError, match=message):
        TDMImputer(**FAST, random_state=0).fit(bad)
