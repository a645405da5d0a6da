"""deid.reconstruct(release, target, seed): one reconstructed data set D' of a disassociated
release (003 Fig. 5, Sec. 6), written as release.<target> (record_id, codes text[]).

SECURITY DEFINER (deid_owner): reads only the release's STORED chunks (never the source, never
the membership), so D' is what any reader of the release could draw. Record ids are 1..n in
cluster order, not the source's. With ``colocate`` > 0 the draw follows the release's utility
policy (its logged, public ``utility`` option; releases/constrained_assignment.py): still a
D' of the release, built from the stored chunks and that policy only. Only the release's
owner or a deid_admin may reconstruct; the table is readable by deid_reader and the caller,
and is dropped with the release.
"""
import json
from types import SimpleNamespace

import numpy as np

from ..request import access, release as rel_mod
from ..write import writer
from ..errors import (DeidError, DUPLICATE_TABLE, INSUFFICIENT_PRIVILEGE, INVALID_PARAMETER_VALUE,
                      NULL_VALUE_NOT_ALLOWED, UNDEFINED_OBJECT)
from ..plan import Fixed, Table, TextArrays
from ..sqltext import qualified, quote_ident
from ..verify.disassociation import read_release, release_tables
from ..methods.disassociation import plugin as disassociation


def reconstruct(db, name, target, seed, caller, colocate=0.0):
    from ..methods.disassociation.disassociate import constraint_ids, reconstruct as draw
    from .constrained_assignment import constrained_reconstruct
    r = checked(db, name, target, seed, caller, colocate)
    utility = _policy(r["utility"]) if colocate > 0 else None
    stored = [q.split(".", 1)[1] for q in r["relations"]]
    tables = release_tables(stored)
    dictionary = [x["v"] for x in db.query(
        "SELECT v FROM (SELECT unnest(codes) AS v FROM {rc} UNION SELECT unnest(codes) FROM {sc}"
        " UNION SELECT code FROM {ic}) d ORDER BY v".format(
            rc=qualified(rel_mod.STORE_SCHEMA, tables["record_chunk"]),
            sc=qualified(rel_mod.STORE_SCHEMA, tables["shared_chunk"]),
            ic=qualified(rel_mod.STORE_SCHEMA, tables["item_chunk"])))]
    arrays = read_release(db, stored, dictionary)
    result = SimpleNamespace(k=r["k"], n_codes=len(dictionary),
                             n_shared=len(arrays["shared_cluster_offsets"]) - 1, **arrays)
    if utility is None:
        d = draw(result, int(seed))
    else:
        index = {v: i for i, v in enumerate(dictionary)}
        d = constrained_reconstruct(result, int(seed), constraint_ids(
            [[index[c] for c in group if c in index] for group in utility], len(dictionary)),
            float(colocate))
    n = len(d.offsets) - 1
    writer.write_table(db, rel_mod.STORE_SCHEMA, Table(target, [
        Fixed("record_id", np.arange(1, n + 1, dtype=np.int64)),
        TextArrays("codes", d.offsets, d.codes, dictionary)]))
    view = qualified(rel_mod.VIEW_SCHEMA, target)
    db.execute(f"CREATE VIEW {view} AS SELECT * FROM {qualified(rel_mod.STORE_SCHEMA, target)}")
    db.execute(f"GRANT SELECT ON {view} TO deid_reader, {quote_ident(caller)}")
    db.execute(f"COMMENT ON VIEW {view} IS " + db.quote_literal(
        f"deid reconstruction (003 Fig. 5, seed {int(seed)}, colocate {float(colocate)}) of "
        f"release {name}"))
    db.execute("INSERT INTO deid.reconstruction (release_id, relation, seed, requested_by,"
               " colocate) VALUES ($1, $2, $3, $4, $5)",
               [r["release_id"], f"{rel_mod.VIEW_SCHEMA}.{target}", int(seed), caller,
                float(colocate)], ["bigint", "text", "int", "name", "float8"])
    return n


def check_arguments(name, target, seed, colocate):
    """The arguments' own refusals, before any release is looked up."""
    if name is None or target is None:
        raise DeidError(NULL_VALUE_NOT_ALLOWED, "release and target must not be NULL",
                        hint="SELECT deid.reconstruct('<release>', '<new table>', seed => 7);")
    if seed is None or seed < 0:
        raise DeidError(INVALID_PARAMETER_VALUE, "seed must be an integer >= 0",
                        hint="The same seed draws the same reconstruction, e.g. seed => 7.")
    if colocate is None or not 0.0 <= colocate <= 1.0:
        raise DeidError(INVALID_PARAMETER_VALUE, "colocate must be a number in [0, 1]",
                        hint="0 deals the chunks at random (003 Fig. 5); 1 puts the pieces of "
                             "one utility constraint on one record wherever the release allows.")


def no_release():
    return DeidError(UNDEFINED_OBJECT, "no committed disassociation release of that name",
                     hint="SELECT name FROM deid.release WHERE method = 'disassociation' "
                          "AND status = 'committed';")


def reconstructable(method, model):
    """A disassociation release with chunks (k^m generalization has none)."""
    return method == disassociation.NAME and model in (None, disassociation.NAME)


def check_owner(requested_by, caller, is_admin):
    if requested_by != caller and not is_admin:
        raise DeidError(INSUFFICIENT_PRIVILEGE, "the release belongs to another role",
                        hint="Only the role that requested a release, or a deid_admin, may "
                             "reconstruct it.")


def check_target(db, target):
    """A valid name of no relation in the release schemas."""
    if not rel_mod.NAME_RE.fullmatch(target):
        raise DeidError(INVALID_PARAMETER_VALUE, "invalid target name",
                        hint="A target is a new table name: lower-case letters, digits and _, "
                             "starting with a letter.")
    exists = db.value("SELECT count(*) FROM pg_catalog.pg_class WHERE relname = $1 AND"
                      " relnamespace IN ('release'::regnamespace, 'deid_release'::regnamespace)",
                      [target])
    if exists:
        raise DeidError(DUPLICATE_TABLE, "a relation of the target name exists",
                        hint="Choose another target name, or drop the old reconstruction with "
                             "its release.")


def checked(db, name, target, seed, caller, colocate=0.0):
    """The release's log row, once every refusal of deid.reconstruct has been passed (the
    same checks, in the same order, as the draw makes)."""
    access.caller_role(db, caller)
    check_arguments(name, target, seed, colocate)
    rows = db.query("SELECT release_id, relations, requested_by::text AS requested_by, method,"
                    " (parameters->>'k')::int AS k, parameters->'options'->>'model' AS model,"
                    " parameters->'options'->'utility' AS utility"
                    " FROM deid.release r WHERE name = $1 AND status = 'committed'"
                    # a node's part of a distributed release, not yet confirmed, is no release
                    " AND NOT EXISTS (SELECT 1 FROM deid.distributed_part p WHERE"
                    " p.release_id = r.release_id AND p.status = 'pending')", [name])
    if not rows or not reconstructable(rows[0]["method"], rows[0]["model"]):
        raise no_release()
    r = rows[0]
    check_owner(r["requested_by"], caller, access.is_admin(db, caller))
    check_target(db, target)
    if colocate > 0:
        _policy(r["utility"])
    return r


def _policy(utility):
    """The release's utility policy (options.utility as logged) as lists of code texts."""
    if isinstance(utility, str):
        utility = json.loads(utility)
    if not utility:
        raise DeidError(INVALID_PARAMETER_VALUE, "the release has no utility policy to follow",
                        hint="Reconstruct with colocate => 0, or request the release with "
                             "options.utility (e.g. deid.utility_policy('icd9', 1)).")
    return [[str(c) for c in group] for group in utility]
