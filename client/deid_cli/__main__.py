"""deid: the command line. `deid --help`, `deid list`, `deid verify RELEASE`."""
import argparse
import sys

import psycopg

from . import __version__, apply_cmd, connection, list_cmd, output, release_cmd, report_cmd, verify_cmd

COMMANDS = [list_cmd, verify_cmd, report_cmd, release_cmd, apply_cmd]
EXAMPLE = """examples:
  PGHOST=db PGUSER=admin PGDATABASE=registry deid list
  deid verify patients_2026q3 --dbname postgresql://admin@db/registry --json

Connection settings are libpq's (PG* variables, ~/.pg_service.conf, --dbname URL), as psql's."""


def parser():
    common = argparse.ArgumentParser(add_help=False,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    common.add_argument("--help", action="help", help="show this help and an example")
    common.add_argument("--json", action="store_true", help="print JSON instead of a table")
    connection.add_arguments(common)
    p = argparse.ArgumentParser(prog="deid", add_help=False, epilog=EXAMPLE,
                                description="deid: releases, release plans, reports, the release log and its re-verification.",
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--help", action="help", help="show this help and an example")
    p.add_argument("--version", action="version", version=f"deid {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for cmd in COMMANDS:
        cmd.add_parser(sub, [common])
    return p


def _error(args, e, err):
    """A server error as psql shows it (ERROR, DETAIL, HINT), or as JSON with --json; the
    release log's bare 'permission denied' gets the grant that is missing."""
    d = e.diag
    hint = d.message_hint
    if d.sqlstate == "42501" and not hint:
        hint = "The release log is readable by deid_admin: GRANT deid_admin TO <role>;"
    if args.json:
        output.to_json({"error": {"sqlstate": d.sqlstate, "message": d.message_primary or str(e),
                                  "detail": d.message_detail, "hint": hint}}, sys.stdout)
        return
    err.write(f"deid {args.command}: ERROR:  {d.message_primary or str(e).strip()}"
              + (f" ({d.sqlstate})" if d.sqlstate else "") + "\n")
    if d.message_detail:
        err.write(f"DETAIL:  {d.message_detail}\n")
    if hint:
        err.write(f"HINT:  {hint}\n")


def main(argv=None):
    args = parser().parse_args(argv)
    try:
        with connection.connect(args) as conn:
            return args.run(args, conn, sys.stdout)
    except psycopg.Error as e:
        _error(args, e, sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
