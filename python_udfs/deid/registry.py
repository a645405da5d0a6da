"""Every release method, by name: its plug-in (pure: options, read plan, run -> ReleasePlan)
and its verifier (reads what was stored; never imports deid.methods). This table feeds
anonymize_request, usage() and the README's method table (tests/unit/test_registry.py checks
that they agree). Adding a method is one plug-in module, one verifier module and one line here.
"""
from dataclasses import dataclass

from .errors import DeidError, INVALID_PARAMETER_VALUE
from .plugins import anatomy, condensation, disassociation, generalization
from .verify import anatomy as verify_anatomy, condensation as verify_condensation
from .verify import disassociation as verify_disassociation
from .verify import generalization as verify_generalization


@dataclass(frozen=True)
class Method:
    name: str
    plugin: object            # NAME, OPTIONS, validate(k, l, opts), plan_read(req, rid), run(frame, req)
    verifier: object          # verify(db, req, frame, tables) -> report dict
    paper: str                # the paper it implements (shared/papers)
    guarantee: str            # one line for the README's method table


METHODS = {}


def register(method):
    METHODS[method.name] = method
    return method


register(Method("anatomy", anatomy, verify_anatomy, "001",
                "(K,L)-anonymity over several sensitive attributes"))
register(Method("generalization", generalization, verify_generalization, "002",
                "k-anonymity per source system, request-driven"))
register(Method("condensation", condensation, verify_condensation, "004",
                "k-indistinguishable synthetic rows, exact cluster means and covariances"))
register(Method("disassociation", disassociation, verify_disassociation, "003",
                "k^m-anonymity of set-valued records (diagnosis codes) by disassociation"))


def method(name):
    if name not in METHODS:
        raise DeidError(INVALID_PARAMETER_VALUE, f"unknown method {name!r}",
                        hint="One of: " + ", ".join(METHODS) + ".")
    return METHODS[name]
