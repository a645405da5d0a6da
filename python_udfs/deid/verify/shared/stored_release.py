"""What the verifiers of the diagnosis-code releases (disassociation.py, 003; km_generalization.py,
its model 'generalization') share for reading deid's stored release back: the schema, the
failure they raise, big-endian integer arrays from the server, and the dictionary's hash keys."""
import numpy as np

from ...errors import DeidError, VERIFICATION_FAILED

STORE_SCHEMA = "deid_release"
_HINT = ("Nothing was released. The stored release differs from what the method computed: "
         "report it with the request (deid.release keeps no row of a failed request).")


def _fail(message):
    raise DeidError(VERIFICATION_FAILED, message, hint=_HINT)


def _ints(buf, width=4):
    return np.frombuffer(buf or b"", f">i{width}").astype(np.int64)


def dictionary_keys(db, dictionary):
    """(hashtext of each label, exact): exact when two labels share a hash (then stored codes
    are matched by their position in the dictionary instead)."""
    hashes = np.asarray([r["h"] for r in db.query(
        "SELECT hashtext(v) AS h FROM unnest($1::text[]) WITH ORDINALITY d(v, o) ORDER BY o",
        [list(dictionary)], ["text[]"])], np.int64)
    return hashes, len(np.unique(hashes)) != len(hashes)
