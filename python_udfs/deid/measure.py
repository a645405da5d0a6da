"""Measurement functions: how identifying is a relation?

deid.k_anonymity, deid.equivalence_classes and deid.l_diversity. They reveal
facts about raw rows, so they run as the caller end to end (SECURITY INVOKER): PostgreSQL
checks the caller's privileges, column privileges, row-level security and security_invoker
views on every read, and what a view or type runs, runs with the caller's rights -- so it
must be the caller's own or trusted code (code_trust, checked before the read).
"""
import numpy as np

from .request import access, code_trust
from .catalog import relations as catalog
from .read import snapshot
from .errors import DeidError, INVALID_PARAMETER_VALUE
from .sqltext import quote_ident

EXACT_MAX_ROWS = 40   # classes up to this size get the exact minimum-deletion L


def relation(db, relid):
    """The relation and the column roles the caller may see (it cannot read the catalog)."""
    return catalog.relation(db, relid, roles=catalog.ROLES_FROM_HELPER)


def trusted_read(db, rel, columns):
    """Refuse before reading `columns` of `rel` as the caller when that read would run code
    the caller does not own (code_trust)."""
    code_trust.check_read(db, access.current_user(db), rel, columns)
    return columns


def columns_for_role(rel, given, role, what):
    """The columns named by the caller, or those classified with `role`."""
    if given is None:
        cols = rel.with_role(role)
        if not cols:
            raise DeidError(INVALID_PARAMETER_VALUE,
                            f"{rel.display} has no column with role {role} and no {what} were given",
                            hint=f"SELECT deid.set_role('{rel.display}', '<column>', '{role}'); "
                                 f"or pass {what} explicitly.")
        return cols
    catalog.require(given, what, f"Pass an array of column names of {rel.display}, or NULL "
                                 f"to use the columns whose role is {role}.")
    bad_role = {"quasi_identifier": ("sensitive", "identifier"),
                "sensitive": ("quasi_identifier", "identifier")}[role]
    out = []
    for name in given:
        col = rel.column(name, what[:-1] if what.endswith("s") else what)
        if col.role in bad_role:
            raise DeidError(INVALID_PARAMETER_VALUE,
                            f'column "{name}" has role {col.role}, not {role}',
                            hint=f"Change it with deid.set_role() or leave it out of {what}.")
        if name in out:
            raise DeidError(INVALID_PARAMETER_VALUE, f'column "{name}" is listed twice in {what}',
                            hint=f"Name each column once in {what}.")
        out.append(name)
    return out


def _class_sql(rel, qis):
    cols = ", ".join("t." + quote_ident(c) for c in qis)
    keys = ", ".join(f"${i + 1}::text, t.{quote_ident(c)}" for i, c in enumerate(qis))
    return cols, keys


def k_anonymity(db, relid, quasi_identifiers):
    rel = relation(db, relid)
    qis = trusted_read(db, rel, columns_for_role(rel, quasi_identifiers, "quasi_identifier",
                                                 "quasi_identifiers"))
    cols, _ = _class_sql(rel, qis)
    return db.value(f"SELECT min(c) FROM (SELECT count(*) AS c FROM {rel.qualified} t"
                    f" GROUP BY {cols}) s")


def equivalence_classes(db, relid, quasi_identifiers):
    rel = relation(db, relid)
    qis = trusted_read(db, rel, columns_for_role(rel, quasi_identifiers, "quasi_identifier",
                                                 "quasi_identifiers"))
    cols, keys = _class_sql(rel, qis)
    rows = db.query(
        f"SELECT row_number() OVER (ORDER BY count(*), {cols}) AS class_id, count(*) AS size,"
        f" jsonb_build_object({keys}) AS qi_values"
        f" FROM {rel.qualified} t GROUP BY {cols} ORDER BY 1", qis)
    return [(r["class_id"], r["size"], r["qi_values"]) for r in rows]


def classes_of(frame, names):
    """Class index (0..C-1, ordered by size then values) of every row."""
    keys = np.stack([frame.columns[c].values.astype(np.float64) for c in names] +
                    [frame.columns[c].null.astype(np.float64) for c in names], axis=1)
    _, inverse, counts = np.unique(keys, axis=0, return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    order = np.argsort(counts, kind="stable")           # by size, then by values
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return rank[inverse], counts[order]


def l_diversity(db, relid, quasi_identifiers, sensitive, exact):
    from .methods.anatomy import diversity
    rel = relation(db, relid)
    qis = columns_for_role(rel, quasi_identifiers, "quasi_identifier", "quasi_identifiers")
    sas = columns_for_role(rel, sensitive, "sensitive", "sensitive attributes")
    overlap = set(qis) & set(sas)
    if overlap:
        raise DeidError(INVALID_PARAMETER_VALUE,
                        f"column {sorted(overlap)[0]} is both quasi-identifier and sensitive",
                        hint="A column has one role.")
    frame = snapshot.read(db, rel, trusted_read(db, rel, qis + sas))
    if frame.n == 0:
        return []
    group, sizes = classes_of(frame, qis)
    codes = np.stack([snapshot.value_dictionary(frame.columns[c])[0] for c in sas], axis=1)
    ls = diversity.certified_l_per_group(group, codes)
    exact_l = [None] * len(sizes)
    if exact:
        order = np.argsort(group, kind="stable")
        bounds = np.searchsorted(group[order], np.arange(len(sizes) + 1))
        for g in np.nonzero(sizes <= EXACT_MAX_ROWS)[0]:
            exact_l[g] = int(diversity.exact_min_deletions(codes[order[bounds[g]:bounds[g + 1]]]))
    return [(g + 1, int(sizes[g]), int(ls[g]), exact_l[g]) for g in range(len(sizes))]
