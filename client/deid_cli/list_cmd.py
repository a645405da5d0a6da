"""deid list: the release log (deid.release), newest first."""
from . import commands

COLUMNS = ["name", "method", "k", "status", "rows", "requested_by", "finished_at"]
QUERY = """SELECT name, method, (parameters->>'k')::int AS k, status,
                  (metrics->>'rows')::bigint AS rows, requested_by::text AS requested_by,
                  finished_at
             FROM deid.release
            WHERE status = ANY (%(statuses)s)
            ORDER BY release_id DESC"""
HELP = "the release log as a table"
EXAMPLE = """example:
  deid list --dbname postgresql://admin@db/registry
  deid list --all --json | jq '.[].name'
The release log is readable by deid_admin (GRANT deid_admin TO <role>)."""


def add_parser(sub, parents):
    p = commands.subcommand(sub, parents, "list", HELP,
                            "List the releases in deid's release log.",
                            EXAMPLE, run)
    p.add_argument("--all", action="store_true",
                   help="also the replaced and dropped releases (default: committed only)")


def run(args, conn, out):
    from .connection import pin_search_path
    pin_search_path(conn)
    statuses = ["committed", "replaced", "dropped"] if args.all else ["committed"]
    rows = conn.execute(QUERY, {"statuses": statuses}).fetchall()
    if args.json:
        from .output import to_json
        to_json([dict(zip(COLUMNS, r)) for r in rows], out)
    else:
        from .output import table
        table(COLUMNS, rows, out)
    return 0
