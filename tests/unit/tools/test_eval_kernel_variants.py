"""The condensation evaluation's kernel variants (bench/eval_condensation/synth.py): inside
the block the plug-in's condense() runs with the variant's keywords, outside it as before,
and a variant's cache fingerprint differs from the default's."""
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from bench.eval_condensation import synth  # noqa: E402
from deid.methods.condensation import condense as module  # noqa: E402


def _table():
    rng = np.random.default_rng(3)
    return np.stack([rng.normal(50, 10, 600), rng.integers(0, 3, 600)], axis=1), \
        ["float", "categorical"]


def test_a_kernel_variant_runs_condense_with_its_keywords_inside_the_block_only():
    X, kinds = _table()
    original = module.condense
    with synth.kernel_variant("deid-rebal0"):
        inside = module.condense(X, kinds, 10, seed=1, block_rows=200)
    assert module.condense is original
    direct = original(X, kinds, 10, seed=1, block_rows=200, rebalance_rounds=0)
    default = original(X, kinds, 10, seed=1, block_rows=200)
    assert np.array_equal(inside.synthetic, direct.synthetic)
    assert np.array_equal(inside.cluster_id, direct.cluster_id)
    assert not np.array_equal(default.cluster_id, direct.cluster_id)


def test_plain_variants_leave_condense_alone_and_fingerprints_differ():
    original = module.condense
    with synth.kernel_variant("deid"):
        assert module.condense is original
    assert synth.deid_fingerprint("deid") != synth.deid_fingerprint("deid-iter1")
    assert synth.deid_fingerprint("deid-iter1") != synth.deid_fingerprint("deid-iter2")
