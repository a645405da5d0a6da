"""The report's data (deid report), read only from what deid made, as the connecting role:
deid.release (deid_admin), deid.equivalence_class (class / group sizes), deid.cluster_member
(cluster sizes, when readable), the release's own relations in schema release (joint k),
deid.verify_release (when the role may execute it), and deid.report_source for everything
derived from the source (the server reads it as this role, only after its walk of the code
that read would run). The client never composes SQL over a relation it did not get from
deid's release log, and only over relations of schema release. No raw row is read."""
import json

import numpy as np
from psycopg import sql

RELEASE = """SELECT release_id, name, method, source_name, source::text, parameters, seed,
                    requested_by::text, started_at, finished_at, status, relations, metrics
               FROM deid.release WHERE name = %s ORDER BY (status = 'committed') DESC, release_id DESC
              LIMIT 1"""
FIELDS = ["release_id", "name", "method", "source", "source_relation", "parameters", "seed",
          "requested_by", "started_at", "finished_at", "status", "relations"]
CLASSES = """SELECT coalesce(source, ''), array_agg(cardinality ORDER BY class_id)
               FROM deid.equivalence_class WHERE release_id = %s GROUP BY 1 ORDER BY 1"""
CLUSTERS = """SELECT array_agg(cardinality(rids) ORDER BY cluster_id)
                FROM deid.cluster_member WHERE release_id = %s"""
# what the report says of the release's method (its facts, the name of its groups, its
# guarantee) comes from the server, beside the source section (deid.report_source: "method",
# declared in the method's folder, methods/<method>/report.py); condensation's rare-value and
# verbatim-row checks come from the verifier's report (metrics->'verification')
# the logged metrics the report shows as utility (never the digests or the phase times)
UTILITY_KEYS = ["rows", "groups", "discernibility", "loss", "levels", "suppressed", "steps",
                "joint_k", "min_group", "min_certified_l", "search", "are", "mre", "chunks",
                "clusters", "rare_values", "verbatim_rows"]


RELEASE_SCHEMA = "release"    # the only schema whose relations the client composes SQL over


def risk(sizes, k):
    """Prosecutor re-identification risk as ARX reports it, over classes of these sizes:
    highest 1/min size, average classes/records, the share of records whose risk 1/size is
    above 1/k (their class is smaller than k), and the share in classes smaller than 2k (those
    a little more knowledge would bring below k)."""
    s = np.asarray(sizes, dtype=np.int64)
    s = s[s > 0]
    if not len(s):
        return None
    n = int(s.sum())
    out = {"classes": int(len(s)), "records": n, "min_size": int(s.min()),
           "highest": 1.0 / float(s.min()), "average": len(s) / n}
    if k:
        out["records_at_risk"] = float(s[s < k].sum()) / n
        out["records_below_2k"] = float(s[s < 2 * k].sum()) / n
    return out


def histogram(sizes):
    """Class sizes -> [[size, how many classes], ...], ascending."""
    v, c = np.unique(np.asarray(sizes, dtype=np.int64), return_counts=True)
    return [[int(a), int(b)] for a, b in zip(v, c)]


def _may(conn, query, args):
    """The value of a privilege test (has_table_privilege, has_function_privilege)."""
    return bool(conn.execute(query, args).fetchone()[0])


def _distributions(conn, rel, k, about):
    """Per source of classes ('' = all quasi-identifiers jointly, or the method's groups): sizes
    histogram and risk; condensation / disassociation clusters when deid.cluster_member is readable."""
    dist = {}
    for source, sizes in conn.execute(CLASSES, [rel["release_id"]]).fetchall():
        label = source or about.get("unsourced", "all quasi-identifiers")
        dist[label] = {"kind": "class", "histogram": histogram(sizes), "risk": risk(sizes, k)}
    joint = _joint_sizes(conn, rel, about)
    if joint:
        dist["all quasi-identifiers, from the release"] = {
            "kind": "class", "histogram": histogram(joint), "risk": risk(joint, k)}
    if _may(conn, "SELECT has_table_privilege('deid.cluster_member', 'SELECT')", []):
        (sizes,) = conn.execute(CLUSTERS, [rel["release_id"]]).fetchone()
        if not sizes:        # condensation logs the sizes of up to PER_CLUSTER_METRICS clusters
            sizes = (rel["metrics"].get("per_cluster") or {}).get("size")
        if sizes:
            dist["clusters"] = {"kind": "cluster", "histogram": histogram(sizes), "risk": risk(sizes, k)}
    return dist


def _joint_sizes(conn, rel, about):
    """Generalization: the classes over all quasi-identifiers jointly (joint k), counted on the
    released table itself when the role may read it (a release, never the source)."""
    qis = sorted((rel["metrics"].get("levels") or {}).keys())
    if not about.get("levels") or not qis or len(rel["relations"]) != 1:
        return None
    schema, _, table = rel["relations"][0].partition(".")
    if schema != RELEASE_SCHEMA or not _may(conn, "SELECT has_table_privilege(%s, 'SELECT')",
                                            [rel["relations"][0]]):
        return None
    q = sql.SQL("SELECT array_agg(n) FROM (SELECT count(*) AS n FROM {} GROUP BY {}) c").format(
        sql.Identifier(schema, table), sql.SQL(", ").join(map(sql.Identifier, qis)))
    return conn.execute(q).fetchone()[0]


def _verification(conn, rel, metrics):
    out = {"logged": metrics.get("verification")}
    if rel["status"] == "committed" and _may(
            conn, "SELECT has_function_privilege('deid.verify_release(text)', 'EXECUTE')", []):
        with conn.transaction():
            try:
                out["fresh"] = conn.execute("SELECT deid.verify_release(%s)",
                                            [rel["name"]]).fetchone()[0]
            except Exception as e:            # a failed re-verification is the report's news
                out["fresh"] = {"verified": False, "error": str(getattr(e, "diag", None)
                                                                and e.diag.message_primary or e)}
    return out


def _from_source(conn, rel):
    """deid.report_source: the source section (row count, or why there is none) and the
    method's utility measures, computed in the server as this role."""
    (out,) = conn.execute("SELECT deid.report_source(%s)", [rel["name"]]).fetchone()
    return out if isinstance(out, dict) else json.loads(out)


def _facts(about, metrics):
    out = {key: metrics[key] for key in about.get("facts", []) if key in metrics}
    checks = metrics.get("verification") or {}
    out.update({f"verified {key}": v for key, v in checks.items()
                if "rare" in key or "verbatim" in key or "copies" in key})
    return out


def gather(conn, name):
    """The report as one dict: request, verification, privacy, utility, source (or None)."""
    row = conn.execute(RELEASE, [name]).fetchone()
    if row is None:
        return None
    *values, metrics = row
    rel = dict(zip(FIELDS, values))
    rel_m = dict(rel, metrics=metrics)
    k = (rel["parameters"] or {}).get("k")
    derived = _from_source(conn, rel)
    about = derived.get("method") or {}
    report = {"request": rel, "method": about,
              "verification": _verification(conn, rel, metrics),
              "privacy": {"k": k, "joint_k": metrics.get("joint_k"),
                          "distributions": _distributions(conn, rel_m, k, about),
                          "facts": _facts(about, metrics)},
              "utility": {key: metrics[key] for key in UTILITY_KEYS if key in metrics}}
    if derived.get("measures"):
        report["utility"]["measures"] = derived["measures"]
    if derived.get("source"):
        report["source"] = derived["source"]
    if derived.get("audience"):       # who reads it besides its requester (revoked: marked)
        rel["audience"] = ", ".join(a["role"] + (" (revoked)" if a.get("revoked") else "")
                                    for a in derived["audience"])
    if derived.get("risk"):
        report["risk"] = derived["risk"]
    report["summary"] = summary(report, metrics)
    return report


def summary(report, metrics):
    """The report in a few plain sentences, from the release and its log only."""
    req, priv = report["request"], report["privacy"]
    p = req["parameters"] or {}
    when = req["finished_at"].strftime("%Y-%m-%d %H:%M %Z") if req["finished_at"] else "(not finished)"
    model = f"k = {p.get('k')}" + (f", l = {p['l']}" if p.get("l") else "")
    out = [f"Release {req['name']}: {metrics.get('rows', '?')} rows of {req['source']} released by "
           f"{req['method']} with {model}, requested by {req['requested_by']}, finished {when}"
           f" ({req['status']})."
           + (f" Readable by {req['audience']} and its requester." if req.get("audience") else "")]
    ver = report["verification"]
    fresh = (ver.get("fresh") or {}).get("verified")
    out.append("The independent verifier passed it before it was committed"
               + ("" if ver.get("logged") else " (no verifier report logged)")
               + {True: "; re-verified now against its digests: passed.",
                  False: "; re-verified now: FAILED (see Verification).",
                  None: "; not re-verified now (the role may not run deid.verify_release)."}[fresh])
    noun = report["method"].get("subject", "class")
    for label, d in priv["distributions"].items():
        r = d["risk"]
        if not r:
            continue
        at_risk = r.get("records_at_risk")
        out.append(f"{label}: the smallest {noun} holds {r['min_size']} records, so a prosecutor "
                   f"who knows a patient is in the release links them to a {noun} of at least "
                   f"{r['min_size']} (risk at most {r['highest']:.1%})"
                   + ("." if at_risk is None else
                      f"; {at_risk:.1%} of the records are in {noun}{'es' if noun.endswith('s') else 's'}"
                      " smaller than k."))
    dcr = (report.get("risk") or {}).get("dcr") or {}
    if dcr.get("checked"):
        out.append(f"Of {dcr['checked']} synthetic rows checked, {dcr['closer_than_neighbour']:.1%} lie "
                   "closer to a source row than that row's nearest other source row"
                   f" ({dcr['identical']:.1%} coincide with one).")
    if report["method"].get("levels") and metrics.get("joint_k") is not None \
            and metrics["joint_k"] < (p.get("k") or 0):
        out.append(f"k holds per source system, not over all quasi-identifiers jointly: there the "
                   f"smallest class holds {metrics['joint_k']} record(s); see the privacy section.")
    return out
