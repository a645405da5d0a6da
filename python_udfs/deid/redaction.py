"""The redaction of a policy requester's errors (docs/security.md): what a caller without
SELECT on the source may learn from a refusal. Shared by every step that runs on its request's
rows: the pending-snapshot store's begin and read (pending.py), the pipeline's finish
(pipeline.py) and the distributed steps (distributed/)."""
import contextlib

from .errors import DeidError, for_policy, uniform_refusal


@contextlib.contextmanager
def redacted(req, reading=False, after_read=None):
    """For a caller without SELECT: an error that may depend on the data (errors.for_policy:
    marked so, or raised once the read began and not a condition of the system) becomes the
    one uniform refusal; any other keeps its SQLSTATE, message and hint (which never hold
    data) and loses its detail (which may); and an error PostgreSQL raised while reading
    becomes a message of deid's own. `after_read` defaults to `reading`."""
    if req.grant["via"] == "select":
        yield
        return
    try:
        yield
    except Exception as e:
        state = getattr(e, "sqlstate", None)
        if for_policy(state, getattr(e, "data_dependent", None),
                      reading if after_read is None else after_read):
            raise uniform_refusal() from None
        if isinstance(e, DeidError):
            e.detail = None
            raise
        if reading and state is not None:
            raise DeidError(state, f"reading {req.rel.display} as the policy's grantor failed",
                            hint="Ask the role that granted the policy to check the source "
                                 "(its rights, its views) and the request.") from None
        raise
