"""How a verifier check reports: the two errors it raises and their texts.

A release that violates the model raises :class:`deid.errors.DeidError` with
SQLSTATE ``VERIFICATION_FAILED`` (DE002, :func:`_fail`); malformed input
raises ``INVALID_PARAMETER_VALUE`` (:func:`_bad`).  Messages name the first
failing group and list a few examples (:func:`_examples`, :func:`_show`).
"""

import numpy as np

from deid.errors import DeidError, INVALID_PARAMETER_VALUE, VERIFICATION_FAILED

_HINT_ROLLBACK = ("The release was rolled back; nothing was written.  The method's "
                  "output failed the independent check, which points to a bug in the "
                  "method: please report it with the request.")

# how many examples a message's detail lists
_EXAMPLES = 5


def _fail(message, hint=None, detail=None):
    """Raise DE002: the release violates the model (default hint: rolled back)."""
    raise DeidError(VERIFICATION_FAILED, message,
                    hint=hint or _HINT_ROLLBACK, detail=detail)


def _bad(message, hint=None):
    """Raise INVALID_PARAMETER_VALUE: the input itself is malformed."""
    raise DeidError(INVALID_PARAMETER_VALUE, message, hint=hint)


def _examples(values, limit=_EXAMPLES):
    """The first ``limit`` values, comma separated, then ", ..." if there are more."""
    values = list(values[:limit + 1])
    text = ", ".join(str(v) for v in values[:limit])
    return text + (", ..." if len(values) > limit else "")


def _show(v):
    """A sensitive value as a message shows it: repr, or NULL for None."""
    return "NULL" if v is None else repr(v.item() if isinstance(v, np.generic) else v)
