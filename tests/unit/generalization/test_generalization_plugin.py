"""plugins/generalization.py and verify/generalization.py without a server: the class table
(002 step 1) against np.unique(axis=0) on random, tie-heavy, degenerate and wide inputs; the
plan names the per-source classes; the verifier's checks of the per-source class catalog."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from deid.errors import DeidError
from deid.methods.generalization.plugin import class_table
from deid.verify import generalization as vg


def reference(columns):
    return np.unique(np.stack(columns, axis=1), axis=0, return_counts=True)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(1, 40), min_size=1, max_size=6), st.integers(0, 300),
       st.integers(0, 2**31 - 1))
def test_class_table_is_unique_rows(sizes, n, seed):
    rng = np.random.default_rng(seed)
    skew = rng.random() < 0.5            # tie-heavy: most rows on a few codes
    columns = [(rng.zipf(2.0, n) - 1) % s if skew else rng.integers(0, s, n) for s in sizes]
    columns = [np.asarray(c, np.int64) for c in columns]
    got, counts = class_table(columns, sizes)
    want, want_counts = reference(columns)
    assert got.dtype == np.int64 and np.array_equal(got, want.reshape(got.shape))
    assert np.array_equal(counts, want_counts)


def test_class_table_wide_keys_fall_back():
    rng = np.random.default_rng(3)
    sizes = [2**20, 2**20, 2**20, 5]            # 65 bits: no packed key
    columns = [rng.integers(0, s, 2000).astype(np.int64) for s in sizes]
    columns[1][:1000] = 7
    got, counts = class_table(columns, sizes)
    want, want_counts = reference(columns)
    assert np.array_equal(got, want) and np.array_equal(counts, want_counts)


def test_class_table_top_of_each_field():
    sizes = [1, 2, 1024, 3]
    columns = [np.zeros(4, np.int64), np.array([1, 1, 0, 1]), np.array([1023, 1023, 0, 5]),
               np.array([2, 2, 0, 1])]
    got, counts = class_table(columns, sizes)
    assert got.tolist() == [[0, 0, 0, 0], [0, 1, 5, 1], [0, 1, 1023, 2]]
    assert counts.tolist() == [1, 1, 2]


# -- the verifier's pure checks of deid.equivalence_class ---------------------------------------

SOURCES = {"registry": ["age", "zip"], "pathology": ["pt"]}


def catalog(**over):
    c = {"registry": (["age", "zip"], np.array([10, 12])), "pathology": (["pt"], np.array([22]))}
    c.update(over)
    return c


def test_check_catalog_accepts_its_own_sources():
    vg.check_catalog(catalog(), SOURCES)
    vg.check_catalog(catalog(), SOURCES, {"registry": np.array([12, 10]), "pathology": np.array([22])})


@pytest.mark.parametrize("cat, stored", [
    (catalog(other=(["x"], np.array([22]))), None),                           # a source too many
    ({"registry": catalog()["registry"]}, None),                              # a source missing
    (catalog(registry=(["age"], np.array([22]))), None),                      # grouped by fewer
    (catalog(registry=(["age", "sex", "zip"], np.array([22]))), None),        # grouped by more
    (catalog(), {"registry": np.array([11, 11]), "pathology": np.array([22])}),  # not the release
    (catalog(), {"registry": np.array([10, 6, 6]), "pathology": np.array([22])}),
])
def test_check_catalog_refuses(cat, stored):
    with pytest.raises(DeidError) as e:
        vg.check_catalog(cat, SOURCES, stored)
    assert e.value.sqlstate == "DE002"


# -- several sources: greedy on the rows (one row per class) gives what it gives on the class table

def _random_multi_source(seed):
    import importlib.util
    import pathlib
    spec = importlib.util.spec_from_file_location(
        "tg", pathlib.Path(__file__).resolve().parent / "test_generalize.py")
    tg = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tg)
    rng = np.random.default_rng(seed)
    d = int(rng.integers(2, 6))
    attrs = [tg.random_hierarchy(rng, f"a{j}", source=("A", "B", None)[j % 3 if j > 1 else j])
             for j in range(d)]
    n = int(rng.integers(1, 400))
    skew = rng.random() < 0.5
    rows = [np.asarray((rng.zipf(1.7, n) - 1) % h.size(0) if skew else rng.integers(0, h.size(0), n),
                       np.int64) for h in attrs]
    return attrs, rows, int(rng.integers(1, 20))


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.integers(0, 2**32 - 1))
def test_greedy_on_rows_equals_greedy_on_classes_with_several_sources(seed):
    from deid.methods.generalization.generalize import greedy
    attrs, rows, k = _random_multi_source(seed)
    classes, counts = class_table(rows, [h.size(0) for h in attrs])
    try:
        want = greedy(classes, counts, attrs, k)
    except DeidError as e:
        with pytest.raises(DeidError) as got:
            greedy(np.stack(rows, axis=1), np.ones(len(rows[0]), np.int64), attrs, k)
        assert (got.value.sqlstate, got.value.message) == (e.sqlstate, e.message)
        return
    got = greedy(np.stack(rows, axis=1), np.ones(len(rows[0]), np.int64), attrs, k)
    assert got.levels == want.levels and got.steps == want.steps and got.loss == want.loss
    assert np.array_equal(got.class_codes, want.class_codes)
    assert np.array_equal(got.class_counts, want.class_counts)
