"""deid apply PLAN.toml: a release plan kept in version control -- hierarchies, column roles,
policies, then requests, in that order, idempotent, in ONE transaction: a step that fails
rolls back everything the plan did, and the summary says what ran and what failed."""
import contextlib
import io
import json
import sys
import time

import psycopg

from . import commands, plan_steps
from .release_cmd import progress

HELP = "run a release plan (TOML): hierarchies, roles, policies, requests"
EXAMPLE = """example:
  deid apply docs/examples/release-plan.toml --dbname service=registry
  deid apply plan.toml --json
The plan runs in one transaction: on a refusal nothing of it stays. A second run is a no-op:
an identical hierarchy, role or policy is left alone, and a request whose release is already
committed with the same parameters is skipped (unless the request says replace = true).
Exit status: 0 applied, 1 a step failed (all rolled back), 2 usage or plan error."""
COLUMNS = ["step", "kind", "what", "result", "seconds"]


def add_parser(sub, parents):
    p = commands.subcommand(sub, parents, "apply", HELP,
                            "Apply a release plan file in one transaction.",
                            EXAMPLE, run)
    p.add_argument("plan", help="the plan file (TOML; see docs/examples/release-plan.toml)")


def _error_object(args, e):
    """The server error as __main__._error formats it for --json."""
    from . import __main__ as cli
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        cli._error(args, e, buf)
    return json.loads(buf.getvalue())["error"]


def run(args, conn, out, err=sys.stderr):
    try:
        steps = plan_steps.steps(plan_steps.load(args.plan))
    except (OSError, ValueError) as e:
        err.write(f"deid apply: {args.plan}: {e}\n")
        return 2
    done, failure = [], None
    handler = progress(conn, err)
    try:
        with conn.transaction():
            for i, (kind, what, fn) in enumerate(steps, 1):
                err.write(f"[{i}/{len(steps)}] {kind} {what}\n")
                handler.reset()
                t = time.perf_counter()
                try:
                    result = fn(conn)
                except (psycopg.Error, plan_steps.Refused) as e:
                    done.append([i, kind, what, "FAILED", round(time.perf_counter() - t, 2)])
                    failure = e
                    raise
                done.append([i, kind, what, result, round(time.perf_counter() - t, 2)])
    except (psycopg.Error, plan_steps.Refused) as e:
        failure = failure or e
        for row in done[:-1]:
            if row[3] not in ("unchanged", "skipped"):
                row[3] += " (rolled back)"
        done += [[j, kind, what, "not run", None]
                 for j, (kind, what, _) in enumerate(steps[len(done):], len(done) + 1)]
    finally:
        conn.remove_notice_handler(handler)
    if args.json:
        body = {"applied": failure is None,
                "steps": [dict(zip(COLUMNS, row)) for row in done]}
        if failure is not None:
            body["error"] = _error_object(args, failure)
        from .output import to_json
        to_json(body, out)
    else:
        from .output import table
        table(COLUMNS, done, out)
        if failure is not None:
            from . import __main__ as cli
            cli._error(args, failure, err)
    return 0 if failure is None else 1
