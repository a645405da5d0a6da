"""Method name -> its release adapter (read plan, run: method -> write -> verify)."""
from . import anatomy_release, generalization_release
from .errors import DeidError, INVALID_PARAMETER_VALUE

METHODS = {"anatomy": anatomy_release, "generalization": generalization_release}
METHOD_NAMES = tuple(METHODS)


def adapter_of(method):
    if method not in METHODS:
        raise DeidError(INVALID_PARAMETER_VALUE, f"unknown method {method!r}",
                        hint="One of: " + ", ".join(METHOD_NAMES) + ".")
    return METHODS[method]
