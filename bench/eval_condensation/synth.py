"""Release makers for the evaluation: deid condensation through its plug-in, and the peers.

* :func:`deid_release` runs ``plugins/condensation.run`` -- the code path of
  ``deid.anonymize_request(..., 'condensation', ...)`` after the read -- on a ``Frame`` built
  from the data set, so the kernel (pure numpy) and the plug-in's own steps (option handling,
  numeric grain, category codes) are the ones the server runs.
* :class:`CopulaPeer`: ``copulas.multivariate.GaussianMultivariate`` (the Gaussian copula engine
  behind SDV) with Beta marginals, SDV ``GaussianCopulaSynthesizer``'s default
  (``default_distribution='beta'``; copulas' own default picks each marginal among candidates
  including a KDE whose inverse CDF made sampling 10-100 x slower), fitted once per data set on the numeric coding (categories as their codes), then
  sampled with a seed per replicate; samples are rounded to integers/valid codes and clipped to
  the observed range (the same step 2.d.iii courtesy deid gets).
* :class:`DataSynthesizerPeer`: DataSynthesizer's correlated attribute mode (a Bayesian network of
  degree 2), epsilon = 0 (no differential-privacy noise: its best utility), described once per
  data set, generated with a seed per replicate.
"""
import os
import sys
import tempfile
import warnings

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python_udfs"))

from deid.request import options as opts_schema  # noqa: E402
from deid.catalog.relations import Column, Relation  # noqa: E402
from deid.read.frame import EncodedColumn, Frame  # noqa: E402
from deid.plan import Labels, SourceCodes  # noqa: E402
from deid.methods.condensation import plugin  # noqa: E402
from deid.request.release import Request  # noqa: E402

# evaluation variants of deid: name -> request options (besides survival and seed). "deid" is
# the plug-in's default (no survival_times option: whatever the method defaults to).
DEID_VARIANTS = {
    "deid": {},
    "deid-guard": {"distance_guard": 8},                       # redraws close clusters
    "deid-original-times": {"survival_times": "original"},     # 004 Alg. 2 as printed
    "deid-perturbed": {"survival_times": "perturbed"},
    "deid-coarsened": {"survival_times": "coarsened"},          # the default before recode
    "deid-ranked": {"survival_times": "ranked"},
    "deid-alg1": {"algorithm": "original"},                    # 004 Alg. 1 (Aggarwal)
}
# evaluation variants of the kernel's clustering (not request options: what a decision on
# 004 Alg. 2 step 2a's rounds would weigh): name -> condense() keywords. The defaults are
# max_iter 5 Lloyd rounds, then 3 rebalanced rounds; rebalance_rounds 0 is 004 as printed.
KERNEL_VARIANTS = {
    "deid-iter3": {"max_iter": 3},
    "deid-iter2": {"max_iter": 2},
    "deid-iter1": {"max_iter": 1},
    "deid-rebal1": {"rebalance_rounds": 1},
    "deid-rebal0": {"rebalance_rounds": 0},
    "deid-iter2-rebal1": {"max_iter": 2, "rebalance_rounds": 1},
}
DEID_VARIANTS.update({name: {} for name in KERNEL_VARIANTS})
METHOD_DIR = os.path.join(ROOT, "python_udfs", "deid", "methods", "condensation")


def _code_digest():
    from .cache import files_digest
    return files_digest([os.path.join(METHOD_DIR, f) for f in os.listdir(METHOD_DIR)
                         if f.endswith(".py")])


CODE_DIGEST = _code_digest()      # read with the plug-in's import: a later edit is not mixed in


def deid_fingerprint(variant):
    """What a deid release depends on: the condensation plug-in's code and the options."""
    from .cache import digest
    kernel = KERNEL_VARIANTS.get(variant)
    return digest(CODE_DIGEST, sorted(DEID_VARIANTS[variant].items()),
                  *([sorted(kernel.items())] if kernel else []))


def bootstrap(ds, seed):
    """A bootstrap resample of the original: the same n rows drawn with replacement."""
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(7,)))
    return ds.df.iloc[rng.integers(0, len(ds.df), len(ds.df))].reset_index(drop=True)


def _frame_and_relation(ds):
    cols, meta = {}, {}
    n = len(ds.df)
    for c in ds.df.columns:
        v = ds.df[c].to_numpy()
        kind = ds.kinds[c]
        if kind == "categorical":
            levels = np.unique(v)
            codes = np.searchsorted(levels, v).astype(np.int64)
            cols[c] = EncodedColumn(c, "category", codes, np.zeros(n, bool),
                                    [str(x) for x in levels])
            meta[c] = Column(c, "text", "text", True, role="quasi_identifier")
        elif kind == "int":
            cols[c] = EncodedColumn(c, "int", v.astype(np.int64), np.zeros(n, bool), None)
            meta[c] = Column(c, "integer", "int4", True, role="quasi_identifier")
        else:
            cols[c] = EncodedColumn(c, "float", v.astype(float), np.zeros(n, bool), None)
            meta[c] = Column(c, "double precision", "float8", True, role="quasi_identifier")
    frame = Frame(n, np.arange(1, n + 1, dtype=np.int64), cols)
    return frame, Relation(1, "public", ds.name, "r", False, meta)


def deid_release(ds, variant, seed, k=None, extra=None):
    """A condensation release of ``ds`` as a DataFrame (columns and codes as in ``ds.df``);
    ``extra``: more request options; the plan's metrics in the frame's ``attrs["metrics"]``."""
    import pandas as pd
    options = dict(DEID_VARIANTS[variant], **(extra or {}))
    if options.get("algorithm") != "original":
        options["survival"] = {"time": ds.time, "status": ds.status}
    options["seed"] = seed
    options = opts_schema.validate(options, opts_schema.COMMON + plugin.OPTIONS, "condensation")
    k = k or ds.k
    plugin.validate(k, None, options)
    frame, rel = _frame_and_relation(ds)
    req = Request(rel, "condensation", k, None, list(ds.df.columns), None, None, options,
                  "eval", 1, seed, "eval", {"via": "select"})
    with kernel_variant(variant):
        plan = plugin.run(frame, req)
    out = {}
    for col in plan.tables[0].columns:
        if isinstance(col, Labels):
            out[col.name] = _ungeneralize(ds, col, seed)
        elif isinstance(col, SourceCodes):
            levels = np.array([float(x) for x in col.dictionary])
            out[col.name] = levels[col.codes].astype(ds.df[col.name].dtype)
        else:           # a number: the source's type unless the release has fractions
            v = np.asarray(col.values, float)   # (e.g. survival times moved between integers)
            integral = ds.df[col.name].dtype.kind == "i" and np.array_equal(v, np.rint(v))
            out[col.name] = v.astype(np.int64) if integral else v
    df = pd.DataFrame(out, columns=ds.df.columns)
    df.attrs["metrics"] = plan.metrics
    return df


class kernel_variant:
    """Within the block, the plug-in's condense() runs with the variant's kernel keywords
    (the plug-in imports condense() from its module at each run)."""

    def __init__(self, variant):
        self.keywords = KERNEL_VARIANTS.get(variant)

    def __enter__(self):
        if self.keywords:
            from deid.methods.condensation import condense as module
            self.module, self.original = module, module.condense
            module.condense = lambda *a, **kw: self.original(*a, **dict(kw, **self.keywords))

    def __exit__(self, *exc):
        if self.keywords:
            self.module.condense = self.original


def _ungeneralize(ds, col, seed):
    """A column whose rare categories the release merged (methods.condensation_rare) back on the
    source's levels, for the models' fixed dummies: a merged row gets one of the merged source
    values drawn in the source's proportions (what an analyst imputing them would do)."""
    src = ds.df[col.name].to_numpy()
    levels, counts = np.unique(src, return_counts=True)
    named = {float(x): i for i, x in enumerate(col.labels) if _is_number(x)}
    value = np.array([float(col.labels[c]) if c < len(col.labels) and _is_number(col.labels[c])
                      else np.nan for c in col.codes])
    merged = np.isnan(value)
    pool = np.array([lv not in named for lv in levels.astype(float)])
    if merged.any() and pool.any():
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(8,)))
        p = counts[pool] / counts[pool].sum()
        value[merged] = rng.choice(levels[pool].astype(float), int(merged.sum()), p=p)
    return value.astype(src.dtype)


def _is_number(x):
    try:
        float(x)
        return True
    except (TypeError, ValueError):
        return False


def _postprocess(ds, sample):
    import pandas as pd
    out = pd.DataFrame(index=range(len(sample)))
    for c in ds.df.columns:
        src = ds.df[c].to_numpy()
        v = pd.to_numeric(sample[c], errors="coerce").to_numpy(dtype=float)
        v = np.where(np.isfinite(v), v, np.median(src))
        if ds.kinds[c] == "categorical":
            levels = np.unique(src)
            idx = np.clip(np.searchsorted(levels, v), 0, levels.size - 1)
            left = np.clip(idx - 1, 0, levels.size - 1)
            nearer = np.abs(levels[left] - v) < np.abs(levels[idx] - v)
            v = levels[np.where(nearer, left, idx)]
        elif ds.kinds[c] == "int":
            v = np.rint(v)
        v = np.clip(v, src.min(), src.max())
        out[c] = v.astype(ds.df[c].dtype)
    return out


class CopulaPeer:
    name = "copulas"

    def __init__(self, ds):
        from copulas.multivariate import GaussianMultivariate
        self.ds = ds
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.model = GaussianMultivariate(
                distribution="copulas.univariate.BetaUnivariate")
            self.model.fit(ds.df.astype(float))

    def sample(self, seed, n=None):
        self.model.set_random_state(seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            s = self.model.sample(n or len(self.ds.df))
        return _postprocess(self.ds, s)


class DataSynthesizerPeer:
    name = "datasynthesizer"

    def __init__(self, ds, degree=2):
        from DataSynthesizer.DataDescriber import DataDescriber
        self.ds = ds
        self.dir = tempfile.mkdtemp(prefix="deid_ds_")
        src = os.path.join(self.dir, "src.csv")
        ds.df.to_csv(src, index=False)
        self.description = os.path.join(self.dir, "description.json")
        describer = DataDescriber(category_threshold=20)
        cats = {c: ds.kinds[c] == "categorical" for c in ds.df.columns}
        keys = {c: False for c in ds.df.columns}
        dtypes = {c: ("Float" if ds.kinds[c] == "float" else "Integer") for c in ds.df.columns}
        with warnings.catch_warnings(), open(os.devnull, "w") as null:
            warnings.simplefilter("ignore")
            old, sys.stdout = sys.stdout, null
            try:
                describer.describe_dataset_in_correlated_attribute_mode(
                    src, k=degree, epsilon=0, attribute_to_datatype=dtypes,
                    attribute_to_is_categorical=cats, attribute_to_is_candidate_key=keys,
                    seed=0)
            finally:
                sys.stdout = old
        describer.save_dataset_description_to_file(self.description)

    def sample(self, seed, n=None):
        from DataSynthesizer.DataGenerator import DataGenerator
        gen = DataGenerator()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            gen.generate_dataset_in_correlated_attribute_mode(n or len(self.ds.df),
                                                              self.description, seed=seed)
        return _postprocess(self.ds, gen.synthetic_dataset)


PEERS = {"copulas": CopulaPeer, "datasynthesizer": DataSynthesizerPeer}
