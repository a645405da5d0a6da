"""Each method's part of the fuzz checker (tests/fuzz/checker.py), one module per method named
as the method, holding what only that method's releases need; like the checker, they import
nothing of deid. A method without a module here is checked by the generic part alone."""
import importlib


def part(method):
    """The method's checker module, or None."""
    try:
        return importlib.import_module(f"{__name__}.{method}")
    except ImportError:
        return None


def result_rows_are_selected_rows(method):
    """Whether a release's result row counts the rows its selection chose (True unless the
    method's part says otherwise)."""
    return getattr(part(method), "RESULT_ROWS_ARE_SELECTED_ROWS", True)


def check_for(checker, method):
    """The method's own checks of a committed release, as checker(name, src, params, relations,
    rids, out): its part's ``check``, or none (only the generic checks then)."""
    fn = getattr(part(method), "check", None)
    if fn is None:
        return lambda *a: checker.stats.update([f"{method}_releases_without_own_checks"])
    return lambda *a: fn(checker, *a)
