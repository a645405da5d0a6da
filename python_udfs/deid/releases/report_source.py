"""deid.report_source(release): what a release's report derives from its source, computed in
the server, as the caller (SECURITY INVOKER end to end), for a deid_admin.

The `deid` client never reads a relation deid did not create: counting a source's rows as the
superuser running a report would run whatever code the source's view holds with the
superuser's rights. So every source-derived figure of the report (the row count, anatomy's
ARE, disassociation's MRE and ARE, condensation's original moments) comes from here, and here
a source is read only as the caller, only with SELECT on the columns read, only after the walk
of the code that read would run (code_trust.check_read, as for every other read), and only
over columns of built-in types (a comparison on another type would run its owner's operator).
When any of that fails the answer says why and holds no source-derived number. The release
side of the measures reads only the release's own relations in schema `release`.
"""
import json

from ..errors import DeidError, INSUFFICIENT_PRIVILEGE, NULL_VALUE_NOT_ALLOWED, UNDEFINED_OBJECT
from ..request import access, code_trust
from ..catalog import relations as catalog
from ..methods import registry
from . import report_measures, report_risk

RELEASE = """SELECT release_id, name, method, source::oid AS source, source_name, parameters::text AS parameters,
                    seed, relations, metrics::text AS metrics
               FROM deid.release WHERE name = $1
              ORDER BY (status = 'committed') DESC, release_id DESC LIMIT 1"""


def audience(db, release_id):
    """Who reads the release besides its requester (log/audience.py), revoked roles marked."""
    rows = db.query("SELECT audience::text AS role, granted_by::text AS granted_by,"
                    " revoked_at IS NOT NULL AS revoked FROM deid.release_audience"
                    " WHERE release_id = $1 ORDER BY granted_at, audience", [release_id], ["bigint"])
    return [dict(r) for r in rows] or [{"role": "deid_reader", "granted_by": None,
                                        "revoked": False}]


def report_source(db, name):
    """The report's source section and method measures of release `name`, as JSON."""
    if name is None:
        raise DeidError(NULL_VALUE_NOT_ALLOWED, "release must not be NULL",
                        hint="SELECT deid.report_source('<release>'); deid list shows the names.")
    caller = access.current_user(db)
    if not access.is_admin(db, caller):
        raise DeidError(INSUFFICIENT_PRIVILEGE, "only a deid administrator may report on a release",
                        hint=f'A superuser or deid_admin runs: GRANT deid_admin TO "{caller}";')
    rows = db.query(RELEASE, [name], ["text"])
    if not rows:
        raise DeidError(UNDEFINED_OBJECT, f"no release named {name}",
                        hint="deid list (or SELECT name FROM deid.release) shows them.")
    r = rows[0]
    rel = dict(r, parameters=json.loads(r["parameters"] or "null") or {},
               metrics=json.loads(r["metrics"] or "null") or {}, seed=r["seed"] or 0,
               relations=[x for x in (r["relations"] or []) if report_measures.is_release_relation(x)])
    source, why = readable_source(db, caller, rel)
    out = {"source": {"relation": rel["source_name"]}, "method": method_report(rel["method"]),
           "audience": audience(db, r["release_id"])}
    if source is None:
        if why is not None:
            out["source"]["why"] = why
        else:
            del out["source"]
    else:
        out["source"]["rows"] = int(db.value(f"SELECT count(*) FROM {source.qualified}"))
    measures = report_measures.measures(db, rel, source)
    if measures:
        out["measures"] = measures
    risk = _risk(db, rel, source, out.get("source", {}).get("rows"))
    if risk:
        out["risk"] = risk
    return json.dumps(out)


def method_report(method):
    """What the client's report says of the release's method (its plug-in's REPORT, the
    pure-data fields): the client imports nothing of the server, so it is handed over here."""
    r = registry.report_of(method)
    return {"subject": r.subject, "unsourced": r.unsourced, "facts": list(r.facts),
            "guarantees": list(r.guarantees), "limits": list(r.limits), "measures": r.measures,
            "risk": r.risk, "levels": r.levels}


def _risk(db, rel, source, source_rows):
    """Source-derived risk figures: condensation's distance to closest record (report_risk)."""
    if registry.report_of(rel["method"]).risk != "dcr" or len(rel["relations"]) != 1 \
            or not report_measures.readable(db, rel["relations"]):
        return None
    table = rel["relations"][0]
    cols = report_measures.numeric_columns(db, table)
    dcr = report_risk.condensation(db, dict(rel, table=report_measures.release_table(table)),
                                   source, source_rows or 0, cols)
    return {"dcr": dcr} if dcr else None


def read_columns(rel):
    """The source columns the report's measures compare (beside the row count)."""
    columns = registry.report_of(rel["method"]).source_columns
    return columns(rel["parameters"], rel["metrics"]) if columns is not None else []


def readable_source(db, caller, rel):
    """(the source as a catalog Relation, None) when the caller may read it and reading it runs
    only code the caller trusts; else (None, why) -- why None when the caller simply may not
    SELECT it (then the report has no source section at all)."""
    if rel["source"] is None:
        return None, "the source no longer exists"
    src = catalog.relation(db, rel["source"], roles=catalog.ROLES_FROM_HELPER)
    columns = read_columns(rel)
    if any(c not in src.columns for c in columns):
        return None, f"not read: {src.display} no longer has the columns the release read"
    if not access.can_select(db, caller, src, columns or list(src.columns)):
        return None, None
    try:
        code_trust.check_read(db, caller, src, columns)
    except DeidError as e:
        return None, ("not read: " + e.message)
    odd = [c for c in columns if src.columns[c].as_text]
    if odd:
        return None, (f'not read: column "{odd[0]}" of {src.display} has a type that is not built '
                      "in (comparing it would run its owner's operators)")
    return src, None
