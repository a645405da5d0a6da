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
FRACTION = re.compile(r"^deid: (\S+) ([0-9]+) %$")
PHASES = ["read", "method", "write", "verify", "publish", "digest"]


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


class Progress:
    """A progress bar per request on `err`, fed by deid's notices: `deid: <phase> done in <s> s`
    closes a phase (read, method, write, verify, publish, digest: a sixth of the bar each), `deid: <phase>
    <p> %` (a long phase's fraction done, sent to a requester with SELECT) fills its quarter.
    On a terminal the bar is redrawn in place and each finished phase stays as a line of its
    own; elsewhere (a log, a pipe) every update is a line. Other notices pass through as psql
    shows them."""
    WIDTH = 20

    def __init__(self, err):
        self.err, self.tty = err, getattr(err, "isatty", lambda: False)()
        self.reset()

    def reset(self):
        """A new request: an empty bar."""
        self.done, self.fraction = [], 0.0

    def bar(self):
        share = min((len(self.done) + self.fraction) / len(PHASES), 1.0)
        fill = int(round(share * self.WIDTH))
        return f"[{'#' * fill}{'-' * (self.WIDTH - fill)}] {share:4.0%}"

    def __call__(self, diag):
        msg = diag.message_primary or ""
        m, f = PHASE.match(msg), FRACTION.match(msg)
        if m:
            self.done.append(m.group(1))
            self.fraction = 0.0
            self._line(f"  {m.group(1):<10} {float(m.group(2)):8.2f} s  {self.bar()}", keep=True)
        elif f:
            self.fraction = int(f.group(2)) / 100
            self._line(f"  {f.group(1):<10} {int(f.group(2)):8d} %  {self.bar()}", keep=False)
        else:
            self._line(f"{diag.severity or 'NOTICE'}:  {msg}", keep=True)

    def _line(self, text, keep):
        if self.tty:
            self.err.write("\r" + text + "\x1b[K" + ("\n" if keep else ""))
        else:
            self.err.write(text + "\n")
        self.err.flush()


def progress(conn, err):
    """Show deid's progress notices as a bar on `err` (Progress); returns the handler."""
    show = Progress(err)
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
