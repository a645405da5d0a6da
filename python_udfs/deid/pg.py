"""Database adapter: the only module that touches PL/Python's ``plpy``.

Every SQL-callable function of deid is a thin PL/Python body that calls
:func:`entry`, which runs the named API function with a :class:`Database`
handle and turns a :class:`~deid.errors.DeidError` into a PostgreSQL error
with its SQLSTATE, detail and hint.
"""
import importlib
import time

import plpy

from .errors import (CODE_CHANGED, CODE_CHANGED_HINT, DeidError, INSUFFICIENT_PRIVILEGE,
                     PLPY_PREFIX as _PREFIX)

READ_HINT = ("deid reads as the calling role (for a policy-based request, as the policy's grantor):"
             " that role needs SELECT on the columns read, and on what a view reads.")


class Database:
    """SPI access with cached prepared plans. All SQL text passed here is
    built from fixed fragments and quote_ident()'ed identifiers; values are
    always bound parameters (deid's own integers excepted: the read's page cuts and random
    seed, in a statement that must run unprepared to run in parallel, parallel_pass.run).
    ``sql_seconds`` adds up the time spent inside
    statements (for the phase timings in the release log)."""

    def __init__(self):
        self._plans = {}
        self.sql_seconds = 0.0

    def _run(self, sql, params, types):
        t = time.perf_counter()
        try:
            if not params:
                return plpy.execute(sql)
            types = types or ["text"] * len(params)
            return plpy.execute(self._plan(sql, types), list(params))
        except plpy.SPIError as e:
            if getattr(e, "sqlstate", None) == INSUFFICIENT_PRIVILEGE:
                # PostgreSQL's own privilege error (it names the relation, nothing more)
                raise DeidError(INSUFFICIENT_PRIVILEGE, _PREFIX.sub("", str(e.args[0] if e.args else e)),
                                hint=_detail_hint(e)[1] or READ_HINT) from None
            raise
        finally:
            self.sql_seconds += time.perf_counter() - t

    def _plan(self, sql, types):
        key = (sql, tuple(types))
        plan = self._plans.get(key)
        if plan is None:
            plan = plpy.prepare(sql, list(types))
            self._plans[key] = plan
        return plan

    def query(self, sql, params=(), types=None):
        """Run a statement; return its rows as a list of dicts."""
        return list(self._run(sql, params, types))

    def execute(self, sql, params=(), types=None):
        """Run a statement for its effect; return the processed-row count."""
        return self._run(sql, params, types).nrows()

    def value(self, sql, params=(), types=None):
        rows = self.query(sql, params, types)
        if not rows:
            return None
        return next(iter(rows[0].values()))

    @staticmethod
    def quote_ident(name):
        return plpy.quote_ident(name)

    @staticmethod
    def quote_literal(value):
        return plpy.quote_literal(value)

    @staticmethod
    def notice(message):
        plpy.notice(message)

    @staticmethod
    def subtransaction():
        return plpy.subtransaction()


class _Raised(plpy.Error):
    """An error of deid's leaving PL/Python. PL/Python writes the class of an exception that
    escapes a function before its message ("plpy.Error: ...", and a traceback in CONTEXT); a
    class of the module ``builtins`` is written by its bare name, so this one reads "deid: ...".
    The PL/pgSQL wrappers (deid._raise) drop that too; what a role sees calling a SECURITY
    INVOKER implementation itself (it must run as its caller, so it is executable) is
    "deid: <message>" with its SQLSTATE, detail and hint."""


_Raised.__name__ = _Raised.__qualname__ = "deid"
_Raised.__module__ = "builtins"

# For an error of a statement deid ran that came without a hint (PostgreSQL's own).
STATEMENT_HINT = ("deid stopped at this error of a statement it ran: check the arguments"
                  " (SELECT deid.usage(); describes every function).")


def _error(message, sqlstate, detail=None, hint=None):
    e = _Raised(message)
    e.sqlstate, e.detail, e.hint = sqlstate, detail or None, hint or None
    raise e


def entry(function, *args, **kwargs):
    """Call ``deid.<module>.<function>`` (given as "module.function") with a
    Database; translate DeidError into a PostgreSQL error."""
    module_name, _, func_name = function.rpartition(".")
    try:
        module = importlib.import_module("deid." + module_name)
        return getattr(module, func_name)(Database(), *args, **kwargs)
    except ImportError as e:
        # a module of deid missing from the build this backend loaded: its files were changed
        # in place (an install holds builds a backend uses; extension/install_python.py)
        _error(f"deid could not load its code: {e}", CODE_CHANGED, hint=CODE_CHANGED_HINT)
    except DeidError as e:
        _error(e.message, e.sqlstate, e.detail, e.hint)
    except plpy.SPIError as e:
        # An error of a statement this function ran (e.g. a nested deid function): raise it
        # again as it was, without PL/Python's exception-class prefix.
        state = getattr(e, "sqlstate", None)
        if state is None:
            raise
        detail, hint = _detail_hint(e)
        _error(_PREFIX.sub("", str(e.args[0] if e.args else e)), state, detail,
               hint or (None if state == "57014" else STATEMENT_HINT))


def _detail_hint(e):
    """(detail, hint) of a PL/Python SPIError (kept in its spidata tuple)."""
    data = getattr(e, "spidata", None) or ()
    return (data[1] if len(data) > 1 else None), (data[2] if len(data) > 2 else None)


