"""Printing results: a plain text table, or JSON (--json)."""
import datetime
import decimal
import json


def _plain(v):
    if isinstance(v, (datetime.datetime, datetime.date)):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return int(v) if v == v.to_integral_value() else float(v)
    return v


def to_json(obj, out):
    out.write(json.dumps(obj, default=_plain, indent=2, sort_keys=False) + "\n")


def _cell(v):
    if v is None:
        return ""
    if isinstance(v, datetime.datetime):
        return v.strftime("%Y-%m-%d %H:%M:%S%z")
    if isinstance(v, (dict, list)):
        return json.dumps(v, default=_plain, sort_keys=True)
    return str(v)


def table(columns, rows, out):
    """Columns left-aligned, a rule under the header, and a row count, as psql prints them."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    line = lambda vals: " | ".join(v.ljust(w) for v, w in zip(vals, widths)).rstrip()
    out.write(line(columns) + "\n")
    out.write("-+-".join("-" * w for w in widths) + "\n")
    for r in cells:
        out.write(line(r) + "\n")
    out.write(f"({len(cells)} row{'' if len(cells) == 1 else 's'})\n")
