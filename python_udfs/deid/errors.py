"""The one exception type of deid, and the one refusal a requester without SELECT gets.

Pure modules raise :class:`DeidError`; the database adapter turns it into a
PostgreSQL error with the same SQLSTATE, message, detail and hint.

A requester without SELECT on the source (a policy-based request) must not tell the data apart
by how deid refuses: every refusal whose cause may depend on the data (too few rows, a NULL, a
value outside a hierarchy, an L no group reaches, ...) reaches it as :func:`uniform_refusal`
-- one SQLSTATE, message and hint, no detail -- whatever the reason and whichever check a
method happens to make first (redaction.redacted applies :func:`for_policy`). A raise site
that tests the data says so with ``data_dependent=True``; after the read begins, every error
is taken to depend on the data unless it says ``data_dependent=False`` or its SQLSTATE class
is a condition of the system (``SYSTEM_CLASSES``).
"""
from typing import Optional


import re

# PL/Python's exception-class prefix of an error's message (pg.py and distributed/protocol.py
# drop it: a message reads as PostgreSQL's own)
# (and deid's own, pg._Raised)
PLPY_PREFIX = re.compile(r"^(?:(?:plpy\.Error|plpy\.SPIError|spiexceptions\.[A-Za-z]+|deid): )+")

# SQLSTATEs used by deid (PostgreSQL's own codes, Appendix A of the manual).
INVALID_PARAMETER_VALUE = "22023"
NULL_VALUE_NOT_ALLOWED = "22004"
UNDEFINED_COLUMN = "42703"
UNDEFINED_TABLE = "42P01"
UNDEFINED_OBJECT = "42704"
DUPLICATE_OBJECT = "42710"
DUPLICATE_TABLE = "42P07"
DEPENDENT_OBJECTS_STILL_EXIST = "2BP01"
INSUFFICIENT_PRIVILEGE = "42501"
SYNTAX_ERROR = "42601"
FEATURE_NOT_SUPPORTED = "0A000"
SERIALIZATION_FAILURE = "40001"
DATA_EXCEPTION = "22000"
INVALID_TEXT_REPRESENTATION = "22P02"
# deid-specific class "DE": release could not meet the privacy model.
PRIVACY_MODEL_UNSATISFIABLE = "DE001"
VERIFICATION_FAILED = "DE002"
# a module of deid cannot be imported: its files changed under the session (the same code and
# hint are inlined in the PL/Python preamble, extension/build_sql.py, which runs before deid loads)
CODE_CHANGED = "DE003"
CODE_CHANGED_HINT = ("deid's files changed under this session (an install or an upgrade): reconnect."
                     " If it happens in a new session too, install deid again for this server.")


# Classes of SQLSTATEs that tell the state of the session or the server, not the data: a cancel,
# a serialization failure or deadlock (the client retries), a lack of resources, a privilege or
# a name (42: decided before any row is read).
SYSTEM_CLASSES = frozenset({"08", "25", "28", "3D", "3F", "40", "42", "53", "55", "57", "58"})

REFUSAL_MESSAGE = "the request cannot be released under its privacy model"
REFUSAL_HINT = ("Without SELECT on the source deid does not say why. Widen the selection, release "
                "fewer or coarser quasi-identifiers, lower k or l (not below the policy's minimum), "
                "or where the method has it keep NULL as a value (options nulls); the role that "
                "granted the policy can check the source.")


class DeidError(Exception):
    """An error with a SQLSTATE, a message, and a hint for the user. ``data_dependent``:
    True when whether (or how) it is raised depends on the source's values, False when it
    never does, None when the place it was raised decides (see the module's docstring)."""

    def __init__(self, sqlstate: str, message: str, hint: Optional[str] = None,
                 detail: Optional[str] = None, data_dependent: Optional[bool] = None) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate
        self.message = message
        self.hint = hint
        self.detail = detail
        self.data_dependent = data_dependent

    def __str__(self):
        return self.message


def uniform_refusal():
    """The one error a requester without SELECT gets for every reason that depends on the data."""
    return DeidError(PRIVACY_MODEL_UNSATISFIABLE, REFUSAL_MESSAGE, hint=REFUSAL_HINT,
                     data_dependent=False)


def for_policy(sqlstate, data_dependent, after_read):
    """Whether an error (its SQLSTATE, its ``data_dependent`` mark or None for an error that is
    not deid's) must reach a requester without SELECT as :func:`uniform_refusal`: marked so, or
    raised once the read began, unless marked otherwise or of a condition of the system."""
    if data_dependent is not None:
        return data_dependent
    if sqlstate == PRIVACY_MODEL_UNSATISFIABLE:
        return True
    return after_read and (sqlstate is None or sqlstate[:2] not in SYSTEM_CLASSES)
