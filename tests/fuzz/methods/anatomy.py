"""Plausible anatomy requests (001): quasi-identifiers and sensitive attributes, an l, column_l,
the exponential-l model or the generalized layout."""
PAPER = "001"


def base(rng, t, k, opts):
    """(columns, k, l); opts gains the method's own options."""
    qis, sas = t.of_role("quasi_identifier"), t.of_role("sensitive")
    l = None
    cols = rng.sample(qis, rng.randint(1, len(qis))) + rng.sample(sas, rng.randint(rng.random() < 0.9, len(sas)))
    if rng.random() < 0.1:
        cols.append(t.col("note"))
    if sas and any(c.role == "sensitive" for c in cols) and rng.random() < 0.6:
        l = rng.choice((1, 2, 2, 3, 4))
        if rng.random() < 0.2:
            opts["column_l"] = {c.name: rng.randint(1, 3) for c in cols if c.role == "sensitive"}
    r = rng.random()
    if r < 0.08:
        opts["model"] = "exponential_l"
    elif r < 0.16:
        opts["output"] = "generalized"
    return cols, k, l
