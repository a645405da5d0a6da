"""deid release SOURCE --method M --k K ...: one deid.anonymize_request, each phase shown on
stderr as deid's progress notice reports it ("deid: <phase> done in <s> s"), the result row
as a table (or --json); a refusal exits 1 with the error as psql prints it."""
import json
import re
import sys

from . import commands

HELP = "run one release request"
EXAMPLE = """example:
  deid release registry.patients --method anatomy --k 10 --l 2 \\
      --columns age,sex,zip,diagnosis --options '{"seed": 1}' --name patients_2026q3
  deid release registry.patients --method generalization --k 5 --json
Exit status: 0 released, 1 refused (the SQLSTATE is printed), 2 usage error."""
RESULT = ["release_id", "relations", "rows", "groups", "discernibility", "verified"]
REQUEST = ("SELECT * FROM deid.anonymize_request(%(source)s::regclass, %(method)s, k => %(k)s,"
           " l => %(l)s, columns => %(columns)s::text[], selection => %(selection)s,"
           " options => %(options)s::jsonb, release => %(release)s)")
PHASE = re.compile(r"^deid: (\S+) done in ([0-9.]+) s$")


def add_parser(sub, parents):
    p = commands.subcommand(sub, parents, "release", HELP,
                            "Run one de-identification request (deid.anonymize_request).",
                            EXAMPLE, run)
    p.add_argument("source", help="the relation to release (schema.table)")
    p.add_argument("--method", required=True,
                   help="anatomy, generalization, disassociation or condensation")
    p.add_argument("--k", type=int, required=True, help="the k of k-anonymity")
    p.add_argument("--l", type=int, help="the l of l-diversity (anatomy)")
    p.add_argument("--columns", help="comma-separated columns to release (default: the classified ones)")
    p.add_argument("--selection", help="a WHERE condition over the source's columns")
    p.add_argument("--options", default="{}", help="the method's options as JSON")
    p.add_argument("--name", help="the release's name (default: generated)")


def progress(conn, err):
    """Show deid's phase notices as they arrive: one line per finished phase on `err`; other
    notices pass through as psql shows them."""
    def show(diag):
        msg = diag.message_primary or ""
        m = PHASE.match(msg)
        err.write(f"  {m.group(1):<10} {float(m.group(2)):8.2f} s\n" if m
                  else f"{diag.severity or 'NOTICE'}:  {msg}\n")
        err.flush()
    conn.add_notice_handler(show)
    return show


def request(conn, source, method, k, l=None, columns=None, selection=None, options=None,
            release=None):
    """Run deid.anonymize_request; its result row as a dict."""
    cur = conn.execute(REQUEST, dict(source=source, method=method, k=k, l=l, columns=columns,
                                     selection=selection, options=json.dumps(options or {}),
                                     release=release))
    return dict(zip([c.name for c in cur.description], cur.fetchone()))


def run(args, conn, out, err=sys.stderr):
    try:
        options = json.loads(args.options)
    except ValueError as e:
        err.write(f"deid release: --options is not JSON: {e}\n")
        return 2
    columns = [c.strip() for c in args.columns.split(",")] if args.columns else None
    err.write(f"deid release {args.source} ({args.method}, k={args.k}):\n")
    handler = progress(conn, err)
    try:
        row = request(conn, args.source, args.method, args.k, args.l, columns, args.selection,
                      options, args.name)
    finally:
        conn.remove_notice_handler(handler)
    from .output import table, to_json
    if args.json:
        to_json(row, out)
    else:
        table(["field", "value"], [(c, row.get(c)) for c in RESULT], out)
    return 0
