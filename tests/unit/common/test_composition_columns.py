"""Rule (c) of log/composition.py: which columns two releases of different methods both publish
with exact per-group statistics, read from their log rows' parameters."""
import json

from deid.log import composition
from deid.methods import registry
from deid.methods.contract import COMPOSITIONS, EXACT_PER_GROUP

ROLES = {"age": {"role": "quasi_identifier"}, "dx": {"role": "sensitive"},
         "lab": {"role": "sensitive"}, "note": {"role": "insensitive"}}


def logged(columns, roles=ROLES):
    return composition._logged_columns(json.dumps(columns), json.dumps(roles) if roles else None)


def test_the_same_sensitive_column_meets():
    assert composition._columns_meet(logged(["age", "dx"]), logged(["age", "dx", "lab"]))


def test_another_sensitive_column_or_a_quasi_identifier_does_not():
    assert not composition._columns_meet(logged(["age", "dx"]), logged(["age", "lab"]))
    assert not composition._columns_meet(logged(["age", "note"]), logged(["age", "note"]))


def test_a_column_sensitive_in_either_release_meets():
    other = dict(ROLES, dx={"role": "insensitive"})      # its role changed in between
    assert composition._columns_meet(logged(["age", "dx"]), logged(["age", "dx"], other))


def test_a_release_logged_without_roles_or_columns_counts_as_meeting():
    assert composition._columns_meet(logged(["age", "lab"]), logged(["lab"], roles=None))
    assert composition._columns_meet(logged(["age", "lab"]), composition._logged_columns(None, None))


def test_the_exact_per_group_groupings_are_declared_compositions():
    assert set(EXACT_PER_GROUP) <= set(COMPOSITIONS)
    exact = [m for m in registry.METHODS if composition.grouping(m) in EXACT_PER_GROUP]
    # anatomy and generalization; condensation and disassociation (and a method this server
    # does not have) are not
    assert 2 <= len(exact) < len(registry.METHODS)
    assert composition.grouping("no_such_method") not in EXACT_PER_GROUP
