"""Plausible disassociation requests (003): the codes column, m, the cluster size, a utility
policy, k^m generalization (options.model); and the long (record, code) form of the source."""
PAPER = "003"


def base(rng, t, k, opts):
    cols = [t.col("codes")]
    if rng.random() < 0.6:
        opts["m"] = rng.choice((1, 2, 2, 3))
    if rng.random() < 0.2:
        opts["max_cluster_size"] = rng.randint(k, 3 * k)
    if rng.random() < 0.1:
        opts["utility"] = [["c0", "c1"], ["c2"]]
    if rng.random() < 0.15:
        opts["model"], opts["hierarchy"] = "generalization", t.code_hierarchy
        opts.pop("max_cluster_size", None)
        opts.pop("utility", None)
    return cols, k, None


def source(rng, req, t, role):
    """The long (record, code) form instead of the codes column, some of the time: True when
    it chose it (its selection is then over the long table's columns)."""
    if rng.random() >= 0.3:
        return False
    req.relation, req.columns = t.long_name, None
    req.options.update({"record": "pid", "item": "icd"})
    if role != "researcher" and rng.random() < 0.5:
        req.selection = rng.choice(("pid > 3", "icd <> 'c0'", "icd IN ('c1', 'c2', 'c3')",
                                    "pid BETWEEN 1 AND 500 OR icd IS NULL", "rid > 2"))
    return True
