"""deid report RELEASE [--out DIR]: a self-contained HTML page and its JSON twin, built only
from what the connecting role may read (report_data.py), written as DIR/RELEASE.html and
DIR/RELEASE.json."""
import pathlib

from . import commands

HELP = "write a release's report (HTML and JSON)"
EXAMPLE = """example:
  deid report patients_2026q3 --out reports/ --dbname service=registry
Writes reports/patients_2026q3.html and reports/patients_2026q3.json and prints their paths
(--json: the report itself). The release log is readable by deid_admin."""


def add_parser(sub, parents):
    p = commands.subcommand(sub, parents, "report", HELP,
                            "Write a release's report: request, verification, privacy, utility.",
                            EXAMPLE, run)
    p.add_argument("release", help="the release's name (deid list shows them)")
    p.add_argument("--out", default=".", help="directory to write into (default: .)")


def run(args, conn, out):
    from .connection import pin_search_path
    pin_search_path(conn)
    import sys

    from . import report_data, report_html
    from .output import to_json
    rep = report_data.gather(conn, args.release)
    if rep is None:
        sys.stderr.write(f"deid report: no release named {args.release}\n")
        return 1
    d = pathlib.Path(args.out)
    d.mkdir(parents=True, exist_ok=True)
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in args.release)
    with open(d / f"{safe}.json", "w") as f:
        to_json(rep, f)
    (d / f"{safe}.html").write_text(report_html.render(rep))
    if args.json:
        to_json(rep, out)
    else:
        out.write(f"{d / (safe + '.html')}\n{d / (safe + '.json')}\n")
    return 0
