"""Standard hierarchies shipped with deid, as the ARX-style rows deid.load_hierarchy reads
(pure: no SQL). Member hierarchies of 002 sec. 4.1; 003 Sec. 6.1's levels 1/2/3 are
category/block/chapter of the ICD ones.

- ICD-10-CM and ICD-9-CM, code -> category -> block (ICD-9: section) -> chapter -> '*': the
  files icd10cm.csv and icd9cm.csv beside this module, generated from the CMS code tables as
  PyPI packages ship them (scripts/icd_hierarchies.py names the sources and licences); codes
  written with their dot ('250.00', 'E11.65') or, with dots = false, without ('25000');
- dates, day ('2024-02-29') -> month ('2024-02') -> quarter ('2024-Q1') -> year ('2024') -> '*';
- ages: bands of 1, 5, 10 and 20 years from 0 (an interval hierarchy: AGE_WIDTHS).
"""
import datetime
import pathlib

from ...errors import DeidError, INVALID_PARAMETER_VALUE, NULL_VALUE_NOT_ALLOWED

HERE = pathlib.Path(__file__).resolve().parent
KINDS = ("icd10cm", "icd9cm")
AGE_WIDTHS = (1, 5, 10, 20)
MAX_AGE = 150
MAX_DAYS = 200 * 366          # two centuries of days: a hierarchy of at most ~75k values


def icd_rows(kind, dots=True):
    """The rows of a shipped ICD hierarchy (its '#' lines dropped), codes without their dot
    unless `dots`."""
    if kind not in KINDS:
        raise DeidError(INVALID_PARAMETER_VALUE, f"unknown standard hierarchy {str(kind)[:40]!r}",
                        hint="deid ships " + " and ".join(repr(k) for k in KINDS) + ".")
    lines = [ln for ln in (HERE / f"{kind}.csv").read_text().splitlines()
             if ln and not ln.startswith("#")]
    if dots:
        return "\n".join(lines)
    # only the code (before the first ';') has a dot: categories and ranges have none
    return "\n".join(ln.replace(".", "", 1) if "." in ln.split(";", 1)[0] else ln for ln in lines)


def date_rows(start, end):
    """Rows day;month;quarter;year of every day from `start` to `end` (dates, both included)."""
    if start is None or end is None:
        raise DeidError(NULL_VALUE_NOT_ALLOWED, "the first and last day must not be NULL",
                        hint="e.g. SELECT deid.date_hierarchy('admission', '2000-01-01', '2025-12-31');")
    start, end = _date(start), _date(end)
    days = (end - start).days + 1
    if days < 1 or days > MAX_DAYS:
        raise DeidError(INVALID_PARAMETER_VALUE,
                        f"a date hierarchy spans 1 to {MAX_DAYS} days, not {days}",
                        hint="Give the first day, then a last day on or after it, at most two "
                             "centuries later.")
    out = []
    for i in range(days):
        d = start + datetime.timedelta(days=i)
        out.append(f"{d.isoformat()};{d.year:04d}-{d.month:02d};{d.year:04d}-Q{(d.month + 2) // 3};"
                   f"{d.year:04d}")
    return "\n".join(out)


def _date(value):
    if isinstance(value, datetime.date):
        return value
    try:
        return datetime.date.fromisoformat(str(value))
    except ValueError:
        raise DeidError(INVALID_PARAMETER_VALUE, f"not a day of years 1 to 9999: {str(value)[:40]!r}",
                        hint="Give dates such as '2024-01-31'.") from None


def age_bounds(max_age):
    """[0, max_age + 1) for an interval hierarchy of AGE_WIDTHS bands."""
    if max_age is None:
        raise DeidError(NULL_VALUE_NOT_ALLOWED, "max_age must not be NULL",
                        hint="e.g. SELECT deid.age_hierarchy('age', 120);")
    if not 1 <= max_age <= MAX_AGE:
        raise DeidError(INVALID_PARAMETER_VALUE, f"max_age must be between 1 and {MAX_AGE}, "
                        f"got {max_age}", hint="The oldest age the column holds, in years.")
    return 0, max_age + 1
