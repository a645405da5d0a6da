"""Plausible generalization requests (002): quasi-identifiers with hierarchies, priorities,
limits and the search."""
PAPER = "002"


def base(rng, t, k, opts):
    qis, sas = t.of_role("quasi_identifier"), t.of_role("sensitive")
    hq = [c for c in qis if c.hierarchy] or qis
    cols = rng.sample(hq, rng.randint(1, len(hq)))
    if rng.random() < 0.1 and len(hq) < len(qis):
        cols.append(rng.choice([c for c in qis if not c.hierarchy]))
    cols += rng.sample(sas, rng.randint(0, len(sas)))
    if rng.random() < 0.3:
        opts["priorities"] = {c.name: round(rng.random(), 2) for c in cols if c.role == "quasi_identifier"}
    if rng.random() < 0.2:
        opts["limits"] = {c.name: rng.randint(0, 2) for c in cols if c.hierarchy}
    if rng.random() < 0.3:
        opts["search"] = rng.choice(("greedy", "optimal"))
    return cols, k, None
