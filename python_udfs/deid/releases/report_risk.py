"""The risk figures of a release's report that need the source (deid.report_source), computed
in the server as the caller on the source that report_source.readable_source handed over
(SELECT, the code walk passed, built-in column types); only shares and distances leave.

Condensation (004) releases synthetic rows; k-indistinguishability says nothing of how close a
synthetic row lies to a real one. The distance to closest record (DCR) measures it: for each
synthetic row, its nearest source row r; the row is *closer than r's neighbour* when it lies
nearer to r than r's own nearest other source row -- closer than the data itself puts anyone
near r, which is what a linkage attack exploits. Distances are Euclidean over the release's
numeric columns, each standardized by the source's mean and standard deviation. A report
checks a seeded sample of synthetic rows (DCR_SAMPLE) against every source row, up to
DCR_MAX_SOURCE source rows (beyond, the report says so: bench/ measures large sets).
"""
import numpy as np

from ..sqltext import quote_ident

DCR_SAMPLE = 2000
DCR_MAX_SOURCE = 200_000
CELLS = 4_000_000           # distance matrix entries per block (32 MB of float64)


def _matrix(db, relation, cols):
    """The relation's columns as an (n, d) float64 matrix, rows with a NULL left out."""
    terms = ", ".join(f"array_agg({quote_ident(c)}::float8) AS c{i}" for i, c in enumerate(cols))
    row = db.query(f"SELECT {terms} FROM {relation}")[0]
    data = np.array([[np.nan if v is None else v for v in (row[f"c{i}"] or [])]
                     for i in range(len(cols))], dtype=float).T
    if data.size == 0:
        return np.zeros((0, len(cols)))
    return data[~np.isnan(data).any(axis=1)]


def nearest(points, source, exclude_self=False):
    """(index, distance) of each point's nearest row of `source`, in blocks of CELLS entries;
    with `exclude_self`, `points` are `source` rows given by index and skip themselves."""
    if exclude_self:
        rows, points = points, source[points]
    norms = (source ** 2).sum(axis=1)
    step = max(1, CELLS // max(1, len(source)))
    idx = np.empty(len(points), dtype=np.int64)
    for a in range(0, len(points), step):
        block = points[a:a + step]
        d2 = norms[None, :] + (block ** 2).sum(axis=1)[:, None] - 2.0 * block @ source.T
        if exclude_self:
            d2[np.arange(len(block)), rows[a:a + step]] = np.inf
        idx[a:a + step] = np.argmin(d2, axis=1)
    # the distance to the row found, computed directly: the expansion above loses the exact
    # zero of a copy (and of a duplicated source row), which the shares below compare
    dist = np.sqrt(((points - source[idx]) ** 2).sum(axis=1))
    return idx, dist


def dcr(released, source, seed):
    """The DCR figures of synthetic rows `released` against `source` (both (n, d), raw)."""
    mu, sd = source.mean(axis=0), source.std(axis=0)
    sd[sd == 0] = 1.0
    s, r = (source - mu) / sd, (released - mu) / sd
    rng = np.random.default_rng(seed)
    pick = np.sort(rng.choice(len(r), size=min(len(r), DCR_SAMPLE), replace=False))
    idx, d = nearest(r[pick], s)
    unique = np.unique(idx)
    _, nn = nearest(unique, s, exclude_self=True)
    neighbour = dict(zip(unique.tolist(), nn.tolist()))
    nn_of = np.array([neighbour[i] for i in idx.tolist()])
    return {"checked": int(len(pick)), "of": int(len(r)),
            "closer_than_neighbour": float(np.mean(d < nn_of)),
            "identical": float(np.mean(d == 0.0)),
            "median_distance": float(np.median(d)),
            "median_neighbour_distance": float(np.median(nn_of)), "sample_seed": int(seed)}


def condensation(db, rel, source, source_rows, cols):
    """The DCR section of a condensation release (None when the source was not handed over)."""
    if source is None:
        return None
    if rel["parameters"].get("selection"):
        return {"why": "the release has a selection; the report compares whole tables"}
    if source_rows > DCR_MAX_SOURCE:
        return {"why": f"the source has more than {DCR_MAX_SOURCE:,} rows; too many for a report"}
    if len(cols) < 1 or not all(c in source.columns and not source.columns[c].as_text for c in cols):
        return {"why": "the released numeric columns are not all built-in columns of the source"}
    released = _matrix(db, rel["table"], cols)
    original = _matrix(db, source.qualified, cols)
    if len(released) == 0 or len(original) < 2:
        return None
    return dict(dcr(released, original, rel["seed"]), columns=cols)
