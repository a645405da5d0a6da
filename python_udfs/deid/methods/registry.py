"""Every release method, by name: its plug-in (pure: options, read plan, run -> ReleasePlan)
and its verifier (reads what was stored; never imports deid.methods). This table feeds
anonymize_request, usage() and the README's method table (tests/unit/common/test_registry.py checks
that they agree). Adding a method is one folder methods/<method>/ (its plug-in, plugin.py, beside
its kernels), one verifier module verify/<method>.py and one line here; both declare the members
of methods/contract.py (docs/dev/adding-a-method.md).
"""
import importlib
from dataclasses import dataclass

from ..catalog.relations import require
from . import contract
from ..errors import DeidError, INVALID_PARAMETER_VALUE, NULL_VALUE_NOT_ALLOWED
from ..request import options as options_schema


def _module(ref):
    return importlib.import_module(ref) if isinstance(ref, str) else ref


@dataclass(frozen=True)
class Method:
    plugin_ref: str           # the plug-in module's dotted path deid.methods.<name>.plugin
                              # (imported on first use): the method's name is its folder's
    verifier_ref: object      # the verifier module (or its dotted path, imported on first use)
    paper: str                # the paper it implements (shared/papers)
    guarantee: str            # one line for the README's method table

    @property
    def name(self):
        return self.plugin_ref.split(".")[-2]

    @property
    def plugin(self):         # a contract.Plugin
        return _module(self.plugin_ref)

    @property
    def verifier(self):       # a contract.Verifier
        return _module(self.verifier_ref)


METHODS = {}


def register(method):
    METHODS[method.name] = method
    return method


# a request imports only its own method's plug-in and verifier
register(Method("deid.methods.anatomy.plugin", "deid.verify.anatomy", "001",
                "(K,L)-anonymity over several sensitive attributes"))
register(Method("deid.methods.generalization.plugin", "deid.verify.generalization", "002",
                "k-anonymity per source system, request-driven"))
register(Method("deid.methods.condensation.plugin", "deid.verify.condensation", "004",
                "k-indistinguishable synthetic rows, exact cluster means and covariances"))
register(Method("deid.methods.disassociation.plugin", "deid.verify.disassociation", "003",
                "k^m-anonymity of set-valued records (diagnosis codes) by disassociation"))


def plugin_of(name):
    """The plug-in of a registered method, or None (a release logged by a method this server
    does not have: its report and its composition fall back to what every method has)."""
    return METHODS[name].plugin if name in METHODS else None


def report_of(name):
    """What the report says of a release by method `name` (its plug-in's REPORT; the plain
    one for a method this server does not have)."""
    plugin = plugin_of(name)
    return plugin.REPORT if plugin is not None else contract.Report()


def method(name):
    if name not in METHODS:
        raise DeidError(INVALID_PARAMETER_VALUE, f"unknown method {name!r}",
                        hint="One of: " + ", ".join(METHODS) + ".")
    return METHODS[name]


def validate_request(method_name, k, l, options):
    """A request's method, k, l and options checked, before anything is read: (the registry's
    method entry, the validated options). Shared by pending.begin and the distributed
    coordinator (distributed/coordinator.py), so that both refuse alike. Here, not in
    request/options.py: the plug-ins' options are of request/options.py, which so imports no
    method."""
    require(method_name, "method", "One of: " + ", ".join(METHODS) + ".")
    entry = method(method_name)
    if k is None:
        raise DeidError(NULL_VALUE_NOT_ALLOWED, "k must not be NULL",
                        hint="k is the smallest group size of the release, e.g. k => 10.")
    opts = options_schema.validate(options_schema.parse(options),
                                   options_schema.COMMON + entry.plugin.OPTIONS, method_name)
    entry.plugin.validate(k, l, opts)
    return entry, opts
