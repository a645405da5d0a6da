"""A fixed-seed sample of the fuzzer (tests/fuzz, `make fuzz` runs 10,000 requests per method):
~100 random requests per method -- tie-heavy, skewed, tiny and NULL-laden tables, hostile
selections, columns, options, k and names, a third of them from a role with only a policy --
through deid.anonymize_request on the real server. Every release is checked against its
privacy model from what was stored, every refusal for a SQLSTATE, a HINT, nothing left
behind and no leak to a caller without SELECT (tests/fuzz/checker.py, which imports nothing
of deid).
"""
import ast
import pathlib

import psycopg
import pytest

from fuzz import runner
from fuzz.checker import Checker

N = 100
SEED = 26
FUZZ = pathlib.Path(__file__).resolve().parents[1] / "fuzz"


CHECKER = ("checker", "check_sets", "check_refusal", "stored", "check_composition")


def _checker_modules():
    """The checker's modules and each method's part of it (tests/fuzz/checkers/)."""
    yield from ((m, FUZZ / f"{m}.py", 1) for m in CHECKER)
    for path in sorted((FUZZ / "checkers").glob("*.py")):
        yield f"checkers.{path.stem}", path, 2


def test_checker_imports_nothing_of_deid():
    """The checker's modules and its per-method parts import the standard library, psycopg and
    each other only."""
    for module, path, depth in _checker_modules():
        tree = ast.parse(path.read_text())
        for n in ast.walk(tree):
            if isinstance(n, ast.Import):
                names = [a.name.split(".")[0] for a in n.names]
            elif isinstance(n, ast.ImportFrom):
                names = [n.module if n.level else n.module.split(".")[0]]
                if n.level:
                    ok = (n.level == depth and (n.module in CHECKER or n.module == "checkers"
                                                or (n.module is None
                                                    and [a.name for a in n.names] == ["checkers"])))
                    assert ok, f"{module}: from {'.' * n.level}{n.module}"
                    continue
            else:
                continue
            assert not [x for x in names if x in ("deid", "python_udfs", "fuzz", "tests")], f"{module}: {names}"


@pytest.fixture(scope="module")
def sample(admin, url):
    return runner.run(url, N, SEED, workers=2, batch=40, out=None, quiet=True)


def test_every_method_gets_its_requests(sample):
    for method, c in sample["methods"].items():
        assert c["requests"] == N, method
        assert c.get("successes", 0) >= 5, f"{method}: too few releases to check: {c}"
        assert c.get("refusals", 0) >= 5, f"{method}: too few refusals: {c}"
        assert c.get("policy_requests", 0) >= 10, method
    assert sum(sample["hostile"].values()) >= 50


def test_no_checker_failure(sample):
    failures = {k: sample["examples"][k] for k, n in sample["findings"].items()
                if k not in runner.PENDING | {"internal", "no_hint"}}
    assert sample["checker_failures"] == 0, failures


def test_no_internal_error_and_every_error_has_a_hint(sample):
    assert sample["findings"].get("internal", 0) == 0, sample["examples"].get("internal")
    assert sample["findings"].get("no_hint", 0) == 0, sample["examples"].get("no_hint")


def test_unbalanced_parenthesis_selection_has_no_python_internals(admin):
    admin.execute("DROP TABLE IF EXISTS public.t_fz_paren")
    admin.execute("CREATE TABLE public.t_fz_paren (id int PRIMARY KEY, age int, dx text)")
    admin.execute("INSERT INTO public.t_fz_paren SELECT i, i % 3, 'd' || i % 2 FROM generate_series(1, 9) i")
    admin.execute("SELECT deid.set_role('public.t_fz_paren', 'age', 'quasi_identifier')")
    admin.execute("SELECT deid.set_role('public.t_fz_paren', 'dx', 'sensitive')")
    with pytest.raises(psycopg.Error) as e:
        admin.execute("SELECT * FROM deid.anonymize_request('public.t_fz_paren', 'anatomy', k => 3,"
                      " columns => '{age,dx}', selection => '(')")
    assert e.value.diag.sqlstate == "42601"
    assert "<class" not in e.value.diag.message_primary, e.value.diag.message_primary


def test_text_null_beside_a_null_has_a_hint(admin):
    admin.execute("DROP TABLE IF EXISTS public.t_fz_null")
    admin.execute("CREATE TABLE public.t_fz_null (id int PRIMARY KEY, s text)")
    admin.execute("INSERT INTO public.t_fz_null SELECT i, CASE WHEN i <= 3 THEN NULL WHEN i <= 6"
                  " THEN 'NULL' ELSE 'x' END FROM generate_series(1, 12) i")
    admin.execute("SELECT deid.drop_hierarchy(name) FROM deid.hierarchy WHERE name = 'fzt_null'")
    admin.execute("SELECT deid.load_hierarchy('fzt_null', E'NULL;*\\nx;*')")
    admin.execute("SELECT deid.set_role('public.t_fz_null', 's', 'quasi_identifier', 'fzt_null')")
    with pytest.raises(psycopg.Error) as e:       # or a release: either way not a bare 22023
        admin.execute("SELECT * FROM deid.anonymize_request('public.t_fz_null', 'generalization', k => 3,"
                      " columns => '{s}', options => '{\"nulls\": \"value\"}', release => 'fzt_null')")
        admin.execute("SELECT deid.drop_release('fzt_null')")
        raise psycopg.Error("released")
    assert e.value.diag.message_hint, f"{e.value.diag.sqlstate} {e.value.diag.message_primary}"


# ---- the checker is not vacuous: a release tampered with after its commit fails it
TAMPERS = [
    ("anatomy", "{age,sex,dx}", "UPDATE deid_release.{r}_qit SET group_id = (SELECT max(group_id)"
     " FROM deid_release.{r}_qit) WHERE ctid = (SELECT min(ctid) FROM deid_release.{r}_qit"
     " WHERE group_id = (SELECT min(group_id) FROM deid_release.{r}_qit))", {"count_table", "truth"}),
    ("anatomy", "{age,sex,dx}", "UPDATE deid_release.{r}_dx SET count = count + 1 WHERE ctid ="
     " (SELECT min(ctid) FROM deid_release.{r}_dx)", {"count_table"}),
    ("anatomy", "{age,sex,dx}", "DELETE FROM deid_release.{r}_qit WHERE group_id = (SELECT"
     " min(group_id) FROM deid_release.{r}_qit)", {"k", "rows", "count_table"}),
    ("generalization", "{age,sex,dx}", "UPDATE deid_release.{r} SET sex = 'zz' WHERE ctid ="
     " (SELECT min(ctid) FROM deid_release.{r})", {"k_per_source", "truth"}),
    ("generalization", "{age,sex,dx}", "UPDATE deid_release.{r} SET dx = 'zz' WHERE ctid ="
     " (SELECT min(ctid) FROM deid_release.{r})", {"truth"}),
    ("condensation", "{age,sex}", "DELETE FROM deid_release.{r} WHERE ctid = (SELECT min(ctid)"
     " FROM deid_release.{r})", {"rows"}),
    ("condensation", "{age,sex}", "UPDATE deid.cluster_member SET rids = rids[2:] WHERE release_id ="
     " (SELECT release_id FROM deid.release WHERE name = '{r}' AND status = 'committed') AND cluster_id = 0",
     {"k", "membership"}),
    ("disassociation", "{codes}", "INSERT INTO deid_release.{r}_record_chunk SELECT cluster_id, chunk_id,"
     " '{{zz_new}}' FROM deid_release.{r}_record_chunk LIMIT 1", {"km", "chunk", "truth"}),
    ("disassociation", "{codes}", "UPDATE deid_release.{r}_cluster SET size = 1 WHERE cluster_id ="
     " (SELECT min(cluster_id) FROM deid_release.{r}_cluster)", {"k", "rows", "membership", "chunk"}),
]


@pytest.fixture(scope="module")
def tamper_table(admin):
    admin.execute("DROP TABLE IF EXISTS public.t_fz_tamper")
    admin.execute("CREATE TABLE public.t_fz_tamper (id int PRIMARY KEY, age int, sex text, dx text, codes text[])")
    admin.execute("INSERT INTO public.t_fz_tamper SELECT i, 20 + i % 4, CASE WHEN i % 2 = 0 THEN 'F'"
                  " ELSE 'M' END, 'd' || i % 5, ARRAY['c' || i % 3, 'c' || (i % 2 + 3)]"
                  " FROM generate_series(1, 60) i")
    admin.execute("SELECT deid.drop_hierarchy(name) FROM deid.hierarchy WHERE name IN ('fzt_age', 'fzt_sex')")
    admin.execute("SELECT deid.interval_hierarchy('fzt_age', 0, 100, '{10}')")
    admin.execute("SELECT deid.load_hierarchy('fzt_sex', E'F;*\\nM;*')")
    admin.execute("SELECT deid.set_role('public.t_fz_tamper', 'age', 'quasi_identifier', 'fzt_age')")
    admin.execute("SELECT deid.set_role('public.t_fz_tamper', 'sex', 'quasi_identifier', 'fzt_sex')")
    admin.execute("SELECT deid.set_role('public.t_fz_tamper', 'dx', 'sensitive')")
    yield admin
    admin.execute("DROP TABLE public.t_fz_tamper")


@pytest.mark.parametrize("i", range(len(TAMPERS)), ids=[f"{t[0]}_{i}" for i, t in enumerate(TAMPERS)])
def test_checker_finds_a_tampered_release(tamper_table, i):
    method, columns, tamper, kinds = TAMPERS[i]
    admin, name = tamper_table, f"fzt_{i}"
    release_id, rows = admin.execute(
        "SELECT release_id, rows FROM deid.anonymize_request('public.t_fz_tamper', %s, k => 3, l => %s,"
        " columns => %s, release => %s)", [method, 2 if method == "anatomy" else None, columns, name]).fetchone()
    checker = Checker(admin, admin)
    try:
        assert checker.check_release(release_id, rows) == []            # untouched: clean
        admin.execute(tamper.format(r=name))
        found = {kind for kind, _ in checker.check_release(release_id, rows)}
        assert found & kinds, f"{method}: tampering found {found}, expected one of {kinds}"
    finally:
        admin.execute("SELECT deid.drop_release(%s)", [name])
