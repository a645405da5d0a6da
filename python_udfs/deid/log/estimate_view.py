"""The view release.<release>_estimate of an anatomy release: 001's estimate of a COUNT query
(sec. "Experiments", the random COUNT queries of Table 1) as rows a BI tool sums.

The estimate of COUNT(*) WHERE <QI conditions> AND <sensitive conditions> is, per group, the
QIT rows that match the QI conditions times, for each conditioned sensitive attribute, the
share of the group's rows whose value matches (the values of a group are spread evenly over
its rows: anatomy releases no link between them). The view holds one row per QIT row and
combination of its group's values of every sensitive attribute, with

    weight = product over the sensitive attributes of count(group, value) / size(group),

so SELECT ..., sum(weight) ... WHERE ... GROUP BY ... is that estimate for any conditions on any
of its columns: an attribute without a condition sums to 1 per QIT row. With one sensitive
attribute a group of n rows and d distinct values gives n * d rows; with several, the product of
their distinct values per group (a view: nothing is stored).

Readable by the release's audience only: the grants of the release's other views (deid_reader
and the requester), made by the same owner. Built over the release's views (on a distributed
coordinator they add a column `node`: groups are per node), it depends on them: dropping a
release's relations (request/release.py, DROP VIEW ... CASCADE) drops it too. It is not one of
the release's `relations`: the verifier and the digests cover the stored tables only.
"""
from ..errors import DeidError, DUPLICATE_TABLE
from ..sqltext import qualified, quote_ident

WEIGHT = "weight"


def weight_column(columns):
    """"weight", or with underscores before it while a released column has that name."""
    name = WEIGHT
    while name in columns:
        name = "_" + name
    return name


def view_sql(view, qit, qit_columns, counts, keys=("group_id",)):
    """CREATE VIEW text: `view` (qualified) over `qit` and the count tables `counts`
    [(attribute, qualified table)], joined on `keys` (the group's id; on a coordinator also
    the node); `qit_columns` are the QIT's columns other than the keys, in order."""
    keys_sql = ", ".join(quote_ident(k) for k in keys)
    columns = [f"q.{quote_ident(c)}" for c in qit_columns]
    joins, shares = [], []
    for i, (attribute, table) in enumerate(counts):
        alias = f"s{i}"
        columns.append(f"{alias}.v AS {quote_ident(attribute)}")
        # the group's size: its rows counted once per attribute (every row holds one value
        # of each, NULL included), so the shares of each attribute sum to 1 in every group;
        # the subquery's columns renamed (v, c, n), whatever the attribute is called
        joins.append(f" JOIN (SELECT {keys_sql}, {quote_ident(attribute)}, count,"
                     f" sum(count) OVER (PARTITION BY {keys_sql}) FROM {table})"
                     f" {alias}({keys_sql}, v, c, n) USING ({keys_sql})")
        shares.append(f"{alias}.c::float8 / {alias}.n::float8")
    weight = weight_column(list(qit_columns) + [a for a, _ in counts])
    columns.append(f"{' * '.join(shares)} AS {quote_ident(weight)}")
    return (f"CREATE VIEW {view} AS SELECT {', '.join(columns)} FROM {qit} q"
            + "".join(joins))


def qit_columns(db, qit, keys=("group_id",)):
    """The columns of the relation `qit` (qualified) but the keys, in order."""
    names = [r["attname"] for r in db.query(
        "SELECT attname::text AS attname FROM pg_catalog.pg_attribute WHERE attrelid = $1::regclass"
        " AND attnum > 0 AND NOT attisdropped ORDER BY attnum", [qit], ["text"])]
    return [c for c in names if c not in keys]


def create(db, view, qit, counts, grantees, comment, keys=("group_id",)):
    """Create and grant the view (see the module's docstring); a relation of its name already
    there: DUPLICATE_TABLE, as for the release's tables."""
    exists = db.value("SELECT pg_catalog.to_regclass($1) IS NOT NULL", [view], ["text"])
    if exists:
        raise DeidError(DUPLICATE_TABLE, f"the estimate view {view} has the name of an existing"
                        " relation", hint="Choose another release name: an anatomy release's "
                        "estimate view is named <release>_estimate.")
    db.execute(view_sql(view, qit, qit_columns(db, qit, keys), counts, keys))
    db.execute(f"GRANT SELECT ON {view} TO {', '.join(quote_ident(g) for g in grantees)}")
    db.execute(f"COMMENT ON VIEW {view} IS " + db.quote_literal(comment))
    return view


def describe(release):
    return (f"deid release {release}: 001's estimate of COUNT queries -- sum the weight column"
            " (one row per QIT row and combination of its group's sensitive values)")


def distributed_counts(name, relations, columns):
    """[(attribute, view)] of a distributed anatomy release's count views, in the order of the
    projection `columns`: every view of `relations` (release.<name>_<suffix>) but the QIT,
    each named <name>_<attribute> (methods/anatomy/plugin.py table_name)."""
    out = []
    for view in relations:
        schema, _, table = view.partition(".")
        table = table.strip('"')
        if table != f"{name}_qit" and table.startswith(f"{name}_"):
            out.append((table[len(name) + 1:], qualified(schema.strip('"'), table)))
    order = {c: i for i, c in enumerate(columns or [])}
    return sorted(out, key=lambda p: order.get(p[0], len(order)))
