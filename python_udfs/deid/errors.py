"""The one exception type of deid.

Pure modules raise :class:`DeidError`; the database adapter turns it into a
PostgreSQL error with the same SQLSTATE, message, detail and hint.
"""

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


class DeidError(Exception):
    """An error with a SQLSTATE, a message, and a hint for the user."""

    def __init__(self, sqlstate, message, hint=None, detail=None):
        super().__init__(message)
        self.sqlstate = sqlstate
        self.message = message
        self.hint = hint
        self.detail = detail

    def __str__(self):
        return self.message
