"""The inputs of a condensation (004 Alg. 1 and Alg. 2) checked before any work: the table and
its column kinds, k, the survival columns (004 Alg. 2 step 1 splits on a binary status), the
survival-time mode, the clustering weights (004 Alg. 2 step 2a) and the block size. Pure Python
and numpy; every refusal is a DeidError with a hint.
"""
import numpy as np

from ...errors import DeidError, INVALID_PARAMETER_VALUE, NULL_VALUE_NOT_ALLOWED

ALGORITHMS = ("improved", "original")
SURVIVAL_TIMES = ("recode", "ranked", "coarsened", "perturbed", "original")
KINDS = ("float", "int", "categorical")
DEFAULT_TIME_WEIGHT = 0.5          # 004 sec. 3.3: "w = 0.5 gave good results"
CLUSTERS_PER_BLOCK = 40            # block_rows="auto": about this many clusters per block
MIN_AUTO_BLOCK_ROWS = 1024


def _invalid(message, hint, data_dependent=None):
    raise DeidError(INVALID_PARAMETER_VALUE, message, hint=hint, data_dependent=data_dependent)


def _is_int(v, least):
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) \
        and v >= least


def _check_table(X, kinds, k):
    if not _is_int(k, 2):
        _invalid("k must be an integer >= 2", "k is the least number of source rows per cluster")
    try:
        X = np.asarray(X, dtype=np.float64)          # read only: condense never writes X
    except (TypeError, ValueError):
        _invalid("the table must be numeric", "code categorical values as numbers")
    if X.ndim != 2:
        _invalid("the table must be a 2-D array", "pass one column per projected attribute")
    if not np.isfinite(X).all():
        raise DeidError(NULL_VALUE_NOT_ALLOWED, "the table contains NULL/NaN/infinite values",
                        hint="say how to treat NULLs (the 'nulls' option) or filter them out",
                        data_dependent=True)
    kinds = [str(kd) for kd in kinds] if kinds is not None else []
    if len(kinds) != X.shape[1] or any(kd not in KINDS for kd in kinds):
        _invalid("kinds must name a supported kind for every column",
                 "use 'float', 'int' or 'categorical' for every column")
    for j, kd in enumerate(kinds):
        if kd == "int" and not np.array_equal(X[:, j], np.rint(X[:, j])):
            _invalid(f"column {j} is declared 'int' but holds non-integral values",
                     "declare it 'float' or round it before condensing")
    return X, kinds, int(k)


def _check_column(c, m, name):
    if not _is_int(c, 0) or c >= m:
        _invalid(f"{name} must be a column index of the table", "pass its position in X")
    return int(c)


def _check_survival(X, kinds, status, time_col):
    if status is None and time_col is None:
        return False
    if status is None or time_col is None:
        _invalid("survival needs both a status column and a time column",
                 "give both 'status' and 'time', or neither for plain condensation")
    m = X.shape[1]
    status, time_col = _check_column(status, m, "status"), _check_column(time_col, m, "time")
    if status == time_col:
        _invalid("status and time must be different columns",
                 "the status is 0/1, the time a number")
    if kinds[time_col] == "categorical":
        _invalid("the survival time must be a numeric column", "declare it 'int' or 'float'")
    if not np.all((X[:, status] == 0) | (X[:, status] == 1)):
        _invalid("the vital status is not binary",
                 "code the status as 0/1 (004 Alg. 2 step 1 splits on it)")
    return True


def _check_survival_times(mode, survival, algorithm):
    if mode is not None and mode not in SURVIVAL_TIMES:
        _invalid(f"unknown survival_times {mode!r}",
                 "use 'recode' (default), 'ranked', 'coarsened', 'perturbed' or 'original' "
                 "(004 as printed)")
    if mode is not None and not (survival and algorithm == "improved"):
        _invalid("survival_times applies only to algorithm 'improved' with survival columns",
                 "drop survival_times, or give status and time")
    return mode or ("recode" if survival and algorithm == "improved" else None)


def _attribute_weights(weights, m, status, time_col, survival, algorithm):
    """Clustering weight per column (004 Alg. 2 step 2a); status gets 0 when split on."""
    if algorithm == "original":
        if weights is not None:
            _invalid("weights do not apply to algorithm 'original'",
                     "004 Alg. 1 weighs every attribute equally; drop 'weights'")
        weights = {}
    elif weights is None:
        weights = {time_col: DEFAULT_TIME_WEIGHT} if survival else {}
    elif not isinstance(weights, dict):
        if time_col is None:
            _invalid("a single weight needs a time column", "pass weights as {column: weight}")
        weights = {time_col: weights}
    given = {}
    for c, w in weights.items():
        c = _check_column(c, m, "a weighted column")
        if c == status:
            _invalid("the status column cannot be weighted",
                     "004 Alg. 2 splits on the status instead of clustering on it")
        try:
            w = float(w)
        except (TypeError, ValueError):
            w = float("nan")
        if not 0.0 <= w <= 1.0:
            _invalid("every weight must be in [0, 1]",
                     "the weights of 004 Alg. 2 step 2a share a total of 1")
        given[c] = w
    total = sum(given.values())
    if total > 1.0 + 1e-9:
        _invalid("the weights add up to more than 1",
                 "the other attributes share 1 minus the given weights", data_dependent=False)
    rest = [j for j in range(m) if j != status and j not in given]
    out = np.zeros(m)
    out[rest] = max(0.0, 1.0 - total) / max(len(rest), 1)
    for c, w in given.items():
        out[c] = w
    return out


def _check_block_rows(block_rows, k):
    if block_rows is None:
        return None
    if isinstance(block_rows, str) and block_rows == "auto":
        return max(CLUSTERS_PER_BLOCK * k, MIN_AUTO_BLOCK_ROWS)
    if not _is_int(block_rows, 1):
        _invalid("block_rows must be 'auto', None or an integer >= 1",
                 "blocks hold between k and max(block_rows, 2k - 1) rows")
    return int(block_rows)


def _check_count(value, name, least, meaning):
    if not _is_int(value, least):
        _invalid(f"{name} must be an integer >= {least}", f"{name}: {meaning}")
    return int(value)
