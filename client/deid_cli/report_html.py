"""The report as one self-contained HTML page: the summary, the request, the verification,
privacy (class / group / cluster sizes against k as embedded PNGs), risk (prosecutor risk;
condensation's distance to closest record) and utility; the source section only when the report has one (the role may SELECT the source).
Numbers are written for people: three significant digits, shares as percentages; nested values
as lines of `name: value`; the verifier's own report stays in the JSON twin."""
import base64
import html
import io
import math

# the method's guarantee and its limits, in the words of docs/methods/<method>.md, come with
# the report (its "method", methods/<method>/report.py); these hold for every method
# (docs/security.md)
COMMON_NOT = ["The privacy model is the whole promise: none of these models is differential privacy; "
              "an attacker who knows more than the model assumes is not covered.",
              "Combinations of releases beyond pairs: the overlap control does not stop trackers "
              "over three or more releases."]


def sig(v, digits=3):
    """A number with `digits` significant digits, without an exponent for everyday sizes:
    0.07345162620972935 -> '0.0735', 13.900666 -> '13.9', 1234.5 -> '1,230'; integers whole."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, int):
        return str(v)
    if not math.isfinite(v):
        return str(v)
    if v == 0:
        return "0"
    if abs(v) >= 1e9 or abs(v) < 1e-4:
        return f"{v:.{digits - 1}e}"
    places = digits - 1 - math.floor(math.log10(abs(v)))
    r = round(v, places)
    return f"{r:,.0f}" if places <= 0 else f"{r:.{places}f}"


def pct(v):
    """A share in [0, 1] as a percentage with three significant digits: 0.0735 -> '7.35 %'."""
    return "" if v is None else sig(100.0 * v) + " %"


def text(v):
    """A value as a person reads it: numbers by sig(), lists joined, mappings as lines of
    `name: value` (one level deep, deeper ones compact)."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if hasattr(v, "isoformat"):
        return v.isoformat(" ", "seconds")
    if isinstance(v, (int, float)):
        return sig(v)
    if isinstance(v, dict):
        return "\n".join(f"{k}: {_compact(x)}" for k, x in v.items())
    if isinstance(v, (list, tuple)):
        nested = any(isinstance(x, (dict, list, tuple)) for x in v)
        return ("\n" if nested else ", ").join(_compact(x) for x in v)
    return str(v)


def _compact(v):
    if isinstance(v, dict):
        return ", ".join(f"{k} = {_compact(x)}" for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_compact(x) for x in v) + "]"
    return text(v)


def _e(v):
    return html.escape(text(v))


def plot_png(histogram, k, title):
    """A bar chart of class sizes (how many classes of each size) with k as a line; PNG as base64."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 2.6), dpi=90)
    ax.bar([h[0] for h in histogram], [h[1] for h in histogram], width=0.8, color="#4477aa")
    if k:
        ax.axvline(k - 0.5, color="#cc3311", linestyle="--", label=f"k = {k}")
        ax.legend()
    ax.set_xlabel("size"), ax.set_ylabel("classes"), ax.set_title(title)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _table(rows):
    return "<table>" + "".join(f"<tr><th>{_e(a)}</th><td>{_e(b)}</td></tr>" for a, b in rows) + "</table>"


def _privacy(p):
    parts = [_table([("k", p["k"]), ("joint k", p["joint_k"])] + list(p.get("facts", {}).items()))]
    for label, d in p["distributions"].items():
        r = d["risk"] or {}
        png = plot_png(d["histogram"], p["k"], f"{d['kind']} sizes: {label}")
        parts.append(f"<h3>{_e(label)}</h3><img alt='{_e(label)} sizes' src='data:image/png;base64,{png}'>"
                     + _table([("classes", r.get("classes")), ("records", r.get("records")),
                               ("smallest", r.get("min_size"))]))
    return "".join(parts)


DCR_WHY = ("needs SELECT on the source (and a source whose read runs only code the reporting "
           "role trusts)")


def _risk(rep):
    """Prosecutor risk per set of classes (from deid's catalog), and for condensation the
    distance to closest record, computed in the server (deid.report_source)."""
    p, about = rep["privacy"], rep.get("method") or {}
    rows = [[label, r.get("classes"), r.get("min_size"), pct(r.get("highest")), pct(r.get("average")),
             pct(r.get("records_at_risk")), pct(r.get("records_below_2k"))]
            for label, r in ((label, d["risk"] or {}) for label, d in p["distributions"].items())]
    parts = ["<h3>Prosecutor risk</h3><p>An attacker who knows a patient is in the release and "
             "links them to their class: the risk is 1 / the class's size.</p>"
             + _grid(["classes of", "classes", "smallest", "highest", "average",
                      "records in classes < k", "records in classes < 2k"], rows)]
    if about.get("risk") == "dcr":
        d = (rep.get("risk") or {}).get("dcr")
        head = "<h3>Distance to closest record</h3>"
        if not d:
            parts.append(head + _table([("not computed", DCR_WHY)]))
        elif d.get("why"):
            parts.append(head + _table([("not computed", d["why"])]))
        else:
            parts.append(head + "<p>Each synthetic row's nearest source row, over the numeric "
                         "columns standardized by the source's mean and standard deviation.</p>"
                         + _table([("synthetic rows checked", f"{d['checked']} of {d['of']}"),
                                   ("closer to a source row than that row's nearest other "
                                    "source row", pct(d["closer_than_neighbour"])),
                                   ("identical to a source row", pct(d["identical"])),
                                   ("median distance to the closest source row", d["median_distance"]),
                                   ("median distance between source neighbours",
                                    d["median_neighbour_distance"]),
                                   ("columns", d.get("columns")), ("sample seed", d.get("sample_seed"))]))
    return "".join(parts)


def _li(items):
    return "<ul>" + "".join(f"<li>{_e(x)}</li>" for x in items) + "</ul>"


def _summary(about, sentences):
    does, does_not = about.get("guarantees", []), about.get("limits", [])
    li = _li
    return ("".join(f"<p>{_e(x)}</p>" for x in sentences)
            + "<h3>What this release protects against</h3>" + li(does)
            + "<h3>What it does not protect against</h3>" + li(does_not + COMMON_NOT))


def _request(req):
    p = req["parameters"] or {}
    rows = [("method", req["method"]), ("source", req["source"]), ("k", p.get("k")), ("l", p.get("l")),
            ("columns", p.get("columns")), ("selection", p.get("selection") or "(all rows)"),
            ("options", p.get("options")), ("seed", req["seed"]), ("requested by", req["requested_by"]),
            ("audience", req.get("audience") or "deid_reader"),
            ("authorized via", p.get("authorized_via")), ("started", req["started_at"]),
            ("finished", req["finished_at"]), ("status", req["status"]),
            ("relations", req["relations"]), ("release id", req["release_id"])]
    return _table(rows)


def _grid(head, rows):
    return ("<table><tr>" + "".join(f"<th>{_e(h)}</th>" for h in head) + "</tr>"
            + "".join("<tr>" + "".join(f"<td>{_e(v)}</td>" for v in r) + "</tr>" for r in rows)
            + "</table>")


def _num(v):
    return None if v is None else sig(v)


def _moments(m):
    """004: release against original, per column and pair."""
    rel, org = m["release"], m.get("original") or {}
    side = lambda d, key, c: _num((d.get(key) or {}).get(c))
    head = ["measure", "release"] + (["original"] if org else [])
    rows = []
    for key in ("mean", "sd"):
        rows += [[f"{key} {c}", side(rel, key, c)] + ([side(org, key, c)] if org else []) for c in rel[key]]
    rows += [[f"corr {c}", side(rel, "corr", c)] + ([side(org, "corr", c)] if org else []) for c in rel["corr"]]
    rows += [[f"coefficient {c}", side(rel, "coefficients", c)] + ([side(org, "coefficients", c)] if org else [])
             for c in rel["coefficients"]]
    return f"<h3>Means, correlations and {_e(m['model'])} (004)</h3>" + _grid(head, rows)


def _why(m):
    return [("not computed", m["why"])] if m.get("why") else []


def _utility(about, u):
    u = dict(u)
    m = u.pop("measures", None)
    parts = []
    if about.get("levels") and isinstance(u.get("levels"), dict):
        limits = u.get("limits") or {}
        parts.append("<h3>Per attribute (002)</h3>" + _grid(
            ["attribute", "level", "limit"], [[a, lv, limits.get(a)] for a, lv in u["levels"].items()]))
        parts.append(_table([("information loss", u.pop("loss", None)),
                             ("suppressed", u.pop("suppressed", None))]))
        u.pop("levels")
    measures = about.get("measures")
    if m and measures == "count_queries":
        parts.append("<h3>Random COUNT queries (001)</h3>" + _table(
            [("average relative error", pct(m.get("are"))), ("queries", m.get("queries")),
             ("ARE, queries returning < 1 % of the rows", pct(m.get("are_below_1pct"))),
             ("ARE, queries returning >= 1 %", pct(m.get("are_from_1pct"))),
             ("query seed", m.get("query_seed"))] + _why(m)))
    elif m and measures == "moments":
        parts.append(_moments(m))
    elif m and measures == "reconstruction":
        parts.append("<h3>On a reconstruction (003 Defs. 2 and 3)</h3>" + _table(
            [("MRE of the utility policy's constraints, mean", pct(m.get("mre_mean"))),
             ("constraints", m.get("mre_constraints")),
             ("constraints with |MRE| < 5 %", pct(m.get("mre_within_5pct"))),
             ("MRE, lowest / highest", None if m.get("mre_min") is None
              else f"{pct(m['mre_min'])} / {pct(m['mre_max'])}"),
             ("ARE of random itemset COUNT queries", pct(m.get("are"))), ("queries", m.get("queries")),
             ("reconstruction seed", m.get("reconstruction_seed"))] + _why(m)))
    parts.append("<h3>Logged by the method</h3>" + _table(list(u.items())))
    return "".join(parts)


def _verification(name, ver):
    """Whether it passed, and which checks the verifier logged; its report itself is in the
    JSON twin (verification.logged, verification.fresh), not pasted here."""
    fresh, logged = ver.get("fresh"), ver.get("logged")
    rows = [("re-verified now", None if fresh is None else fresh.get("verified"))]
    if fresh and fresh.get("error"):
        rows.append(("re-verification failed", fresh["error"]))
    rows.append(("checks logged by the verifier at commit",
                 ", ".join(sorted(logged)) if isinstance(logged, dict) else logged))
    rows.append(("the verifier's reports", f"{name}.json: verification"))
    return _table(rows)


def render(rep):
    req = rep["request"]
    ver = rep["verification"]
    fresh = ver.get("fresh")
    body = [f"<h1>Release report: {_e(req['name'])}</h1>",
            "<h2>Summary</h2>", _summary(rep.get("method") or {}, rep.get("summary", [])),
            "<h2>Request</h2>", _request(req),
            "<h2>Verification</h2>",
            _verification(req["name"], ver),
            "<h2>Privacy</h2>", _privacy(rep["privacy"]),
            "<h2>Risk</h2>", _risk(rep),
            "<h2>Utility</h2>", _utility(rep.get("method") or {}, rep["utility"])]
    if "source" in rep:
        body += ["<h2>Against the source</h2>", _table(list(rep["source"].items()))]
    style = ("body{font-family:sans-serif;max-width:60em;margin:auto}table{border-collapse:collapse}"
             "th,td{border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top}"
             "td{font-family:monospace;white-space:pre-wrap}")
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>deid report {_e(req['name'])}"
            f"</title><style>{style}</style></head><body>{''.join(body)}</body></html>\n")
