"""errors.for_policy: which errors reach a requester without SELECT as the one uniform refusal
(the database side is tests/security/test_refusals.py)."""
import pytest

from deid.errors import DeidError, for_policy, uniform_refusal


@pytest.mark.parametrize("sqlstate, mark, after_read, refused", [
    ("22004", True, False, True),       # marked: whenever it is raised
    ("22023", None, False, False),      # before the read: about the request, not the data
    ("22023", None, True, True),        # after it: may depend on the data
    ("DE001", None, False, True),       # the privacy model: always
    ("DE002", None, True, True),        # a verification failure
    (None, None, True, True),           # a Python error of a method (its message may hold a value)
    (None, None, False, False),
    ("40001", None, True, False),       # conditions of the system: retry, cancel, resources
    ("57014", None, True, False),
    ("53200", None, True, False),
    ("42501", None, True, False),
    ("42P07", None, True, False),
    ("22023", False, True, False),      # marked independent of the data (a name too long)
])
def test_for_policy(sqlstate, mark, after_read, refused):
    assert for_policy(sqlstate, mark, after_read) is refused


def test_the_refusal_is_one_and_the_same():
    a, b = uniform_refusal(), uniform_refusal()
    assert (a.sqlstate, a.message, a.hint, a.detail) == (b.sqlstate, b.message, b.hint, b.detail)
    assert a.sqlstate == "DE001" and a.hint and a.detail is None
    assert not for_policy(a.sqlstate, a.data_dependent, True)     # passes through as it is
    assert not any(ch.isdigit() for ch in a.message + a.hint)


def test_a_deid_error_is_not_marked_unless_said():
    assert DeidError("22023", "m", hint="h").data_dependent is None
