"""deid verify RELEASE: deid.verify_release() -- the stored release against its digests and
through its method's verifier again; a failure (DE002) exits non-zero."""
from . import commands

HELP = "re-verify a committed release"
EXAMPLE = """example:
  deid verify patients_2026q3 --dbname service=registry
  deid verify patients_2026q3 --json
Exit status: 0 verified, 1 verification failed or refused (e.g. DE002), 2 usage error."""


def add_parser(sub, parents):
    p = commands.subcommand(sub, parents, "verify", HELP,
                            "Run a committed release's verifier again on what is stored.",
                            EXAMPLE, run)
    p.add_argument("release", help="the release's name (deid list shows them)")


def _rows(result):
    """The result as (check, value) rows: the top-level fields, then the verifier's report and
    the digests' fields, flattened one level with dotted names."""
    rows = [("release", result.get("release")), ("method", result.get("method")),
            ("verified", result.get("verified"))]
    for section in ("report", "digests"):
        part = result.get(section)
        if isinstance(part, dict):
            rows += [(f"{section}.{k}", v) for k, v in sorted(part.items())]
        elif part is not None:
            rows.append((section, part))
    rows += [("warning", w) for w in result.get("warnings") or []]
    return rows


def run(args, conn, out):
    from .connection import pin_search_path
    pin_search_path(conn)
    result = conn.execute("SELECT deid.verify_release(%s)", [args.release]).fetchone()[0]
    if args.json:
        from .output import to_json
        to_json(result, out)
    else:
        from .output import table
        table(["check", "value"], _rows(result), out)
    return 0 if result.get("verified") else 1
