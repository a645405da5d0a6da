"""deid.anonymize_request(method => 'generalization') on a real server: the
paper's use case (002 sec. 5, Tables 6-9) end to end, selection rules, the
predicate whitelist and k per source system."""
import contextlib
import importlib.util
import json
import pathlib

import psycopg
import pytest

from conftest import hint_of, sqlstate_of

_spec = importlib.util.spec_from_file_location(
    "use_case_data", pathlib.Path(__file__).resolve().parents[1] / "unit" / "generalization" / "test_generalize.py")
uc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(uc)
SELECTION = "localisation='Mamma' AND pt='1' AND g='1'"


@pytest.fixture(scope="module")
def mamma(admin):
    admin.execute("DROP TABLE IF EXISTS public.mamma")
    admin.execute("CREATE TABLE public.mamma (id int PRIMARY KEY, localisation text, pt text, pn text,"
                  " pm text, g text, r text)")
    with admin.cursor() as cur:
        cur.executemany("INSERT INTO mamma VALUES (%s, %s, %s, %s, %s, %s, %s)",
                        [(i + 1, *row) for i, row in enumerate(uc.SHARED_TABLE)])
    for a in uc.ORDER:
        admin.execute("SELECT deid.drop_hierarchy(%s) FROM deid.hierarchy WHERE name = %s",
                      ["m_" + a, "m_" + a])
        admin.execute("SELECT deid.load_hierarchy(%s, %s, %s)",
                      ["m_" + a, "\n".join(";".join(r) for r in uc.LEVELS[a]), [float(x) for x in uc.LOSS[a]]])
        admin.execute("SELECT deid.set_role('mamma', %s, 'quasi_identifier', %s, source => 'findings')",
                      [a, "m_" + a])
    return admin


def gen(conn, release, k=2, selection=SELECTION, options=None, table="mamma", columns=None):
    return conn.execute(
        "SELECT * FROM deid.anonymize_request(%s, 'generalization', k => %s, columns => %s,"
        " selection => %s, options => %s, release => %s)",
        [table, k, columns, selection, json.dumps(options or {}), release]).fetchone()


def metrics(conn, release):
    return conn.execute("SELECT metrics FROM deid.release WHERE name = %s AND status = 'committed'",
                        [release]).fetchone()[0]


def test_table8_steps_r_then_pt(mamma):
    rid, relations, rows, groups, _, verified = gen(
        mamma, "m_t8", options={"priorities": {"r": 0.20, "pm": 0.40, "pn": 0.60, "pt": 0.80}})
    assert verified and relations == ["release.m_t8"] and rows == 42 and groups == 16
    m = metrics(mamma, "m_t8")
    assert [(s["attribute"], s["from"], s["to"]) for s in m["steps"]] == [("r", 0, 1), ("pt", 0, 1)]
    assert [round(s["cost"], 6) for s in m["steps"]] == [0.2, 0.24]
    assert m["suppressed"] == ["r"]
    released = mamma.execute("SELECT DISTINCT pt, r, localisation, g FROM release.m_t8").fetchall()
    assert released == [("1", "*", "Mamma", "1")]
    assert mamma.execute("SELECT min(c) FROM (SELECT count(*) c FROM release.m_t8"
                         " GROUP BY localisation, pt, pn, pm, g, r) s").fetchone()[0] >= 2
    assert mamma.execute("SELECT count(*) FROM deid.equivalence_class WHERE release_id = %s",
                         [rid]).fetchone()[0] == 16


def test_table9_pn_and_pt_nothing_suppressed(mamma):
    _, _, rows, groups, _, verified = gen(
        mamma, "m_t9", options={"priorities": {"pn": 0.80, "r": 0.60, "pm": 0.40, "pt": 0.20},
                                "limits": {"pm": 0, "pt": 1}})
    m = metrics(mamma, "m_t9")
    assert [s["attribute"] for s in m["steps"]] == ["pt", "pn"]
    assert m["suppressed"] == [] and groups == 20 and verified
    assert mamma.execute("SELECT count(*) FROM release.m_t9 WHERE pn IN ('1mi', '1a', '1b')"
                         ).fetchone()[0] == 0          # PN shown at level 1


def test_selection_pins_and_caps(mamma):
    gen(mamma, "m_pins", options={"priorities": {"r": 0.2, "pt": 0.8}})
    m = metrics(mamma, "m_pins")
    assert m["limits"]["localisation"] == 0 and m["limits"]["g"] == 0 and m["limits"]["pt"] == 1
    # k = 43 > the 42 selected rows: refused, naming the blocking limits (pt capped at 1 by the
    # selection), nothing released
    with pytest.raises(psycopg.Error) as e:
        gen(mamma, "m_blocked", k=43)
    assert sqlstate_of(e) == "DE001"
    assert "pt" in str(e.value) and hint_of(e)
    assert not mamma.execute("SELECT 1 FROM pg_class WHERE relname = 'm_blocked'").fetchone()


def test_user_limit_smaller_than_selection_limit_wins(mamma):
    with pytest.raises(psycopg.Error) as e:
        gen(mamma, "m_lim", options={"limits": {"pt": 0, "r": 0, "pn": 0, "pm": 0}})
    assert sqlstate_of(e) == "DE001"


@pytest.mark.parametrize("selection, state, part", [
    ("1=1; DROP TABLE mamma", "42601", ";"),
    ("pt IN (SELECT pt FROM mamma)", "0A000", "SELECT"),
    ("lower(pt) = '1'", "0A000", "lower"),
    ("nope = 1", "42703", "nope"),
    ("pt::int = 1", "0A000", "cast"),
    ("pt = '1' -- comment", "42601", "comment"),
])
def test_rejected_predicates_create_nothing(mamma, selection, state, part):
    before = mamma.execute("SELECT count(*) FROM pg_class").fetchone()[0]
    with pytest.raises(psycopg.Error) as e:
        gen(mamma, "m_bad", selection=selection)
    assert sqlstate_of(e) == state
    assert part.lower() in str(e.value).lower()
    assert mamma.execute("SELECT count(*) FROM pg_class").fetchone()[0] == before
    assert mamma.execute("SELECT count(*) FROM mamma").fetchone()[0] == len(uc.SHARED_TABLE)


def setup_t_src(admin):
    """t_src: 3000 sample patients, age/sex/race from source registry, pt from pathology."""
    admin.execute("DROP TABLE IF EXISTS public.t_src")
    admin.execute("CREATE TABLE public.t_src AS SELECT patient_id, age, sex, race, pt, diagnosis"
                  " FROM registry.patients")
    admin.execute("ALTER TABLE t_src ADD PRIMARY KEY (patient_id)")
    admin.execute("SELECT deid.interval_hierarchy('s_age', 0, 120, '{5,10,20,40}')"
                  " WHERE NOT EXISTS (SELECT 1 FROM deid.hierarchy WHERE name = 's_age')")
    for name, rows in [("s_sex", "F;*\nM;*"), ("s_race", "white;*\nblack;*\nasian;*\nother;*"),
                       ("s_pt", "1a;1;*\n1b;1;*\n1c;1;*\n1mic;1;*\n2a;2;*\n2b;2;*\n3;3;*\n4;4;*")]:
        admin.execute("SELECT deid.load_hierarchy(%s, %s) WHERE NOT EXISTS"
                      " (SELECT 1 FROM deid.hierarchy WHERE name = %s)", [name, rows, name])
    for col, h, src in [("age", "s_age", "registry"), ("sex", "s_sex", "registry"),
                        ("race", "s_race", "registry"), ("pt", "s_pt", "pathology")]:
        admin.execute("SELECT deid.set_role('t_src', %s, 'quasi_identifier', %s, source => %s)", [col, h, src])
    admin.execute("SELECT deid.set_role('t_src', 'diagnosis', 'sensitive')")


def test_k_per_source_on_sample(admin):
    setup_t_src(admin)
    for k in (5, 50):
        for search in ("greedy", "optimal"):
            name = f"t_src_{search}_{k}"
            # four groupings of the same rows, compared on purpose: the composition rule would
            # refuse the second, so the superuser overrides it (logged as a warning)
            r = gen(admin, name, k=k, selection=None, table="t_src",
                    options={"search": search, "allow_overlap": True})
            assert r[5] and r[2] == 3000
            for cols in ("age, sex, race", "pt"):
                assert admin.execute(f"SELECT min(c) FROM (SELECT count(*) c FROM release.{name}"
                                     f" GROUP BY {cols}) s").fetchone()[0] >= k
        g, o = metrics(admin, f"t_src_greedy_{k}"), metrics(admin, f"t_src_optimal_{k}")
        assert g["loss"] >= o["loss"] - 1e-9
    v = metrics(admin, "t_src_greedy_5")["verification"]
    assert set(v["sources"]) == {"registry", "pathology"}


def test_generalization_errors(mamma):
    for opts, state in [({"search": "best"}, "22023"), ({"priorities": {"pt": 2}}, "22023"),
                        ({"limits": {"zip": 1}}, "22023")]:
        with pytest.raises(psycopg.Error) as e:
            gen(mamma, "m_err", options=opts)
        assert sqlstate_of(e) == state and hint_of(e)
    with pytest.raises(psycopg.Error) as e:
        mamma.execute("SELECT * FROM deid.anonymize_request('mamma', 'generalization', k => 2, l => 2)")
    assert sqlstate_of(e) == "22023"


# -- the class catalog: the verified per-source classes (deid 1.1.0) ------------------------------

@contextlib.contextmanager
def rolled_back(conn):
    conn.execute("BEGIN")
    try:
        yield
    finally:
        conn.execute("ROLLBACK")


@pytest.fixture(scope="module")
def t_src(admin):
    setup_t_src(admin)
    return admin


def test_catalog_holds_the_classes_of_every_source(t_src):
    rid, *_ = gen(t_src, "t_src_cat", k=5, selection=None, table="t_src")
    rows = t_src.execute(
        "SELECT source, count(*), sum(cardinality), min(cardinality),"
        " array_agg(DISTINCT k ORDER BY k) FROM deid.equivalence_class, jsonb_object_keys(generalized) k"
        " WHERE release_id = %s GROUP BY source ORDER BY source", [rid]).fetchall()
    sizes = {s: (n // len(keys), total // len(keys), lo, keys) for s, n, total, lo, keys in rows}
    assert set(sizes) == {"pathology", "registry"}
    assert sizes["registry"][3] == ["age", "race", "sex"] and sizes["pathology"][3] == ["pt"]
    for s, cols in (("registry", "age, sex, race"), ("pathology", "pt")):
        classes, total, lo, _ = sizes[s]
        want = t_src.execute(f"SELECT count(*), sum(c), min(c) FROM (SELECT count(*) c FROM"
                             f" release.t_src_cat GROUP BY {cols}) s").fetchone()
        assert (classes, total, lo) == tuple(want) and lo >= 5 and total == 3000
    ids = t_src.execute("SELECT array_agg(class_id ORDER BY class_id) FROM deid.equivalence_class"
                        " WHERE release_id = %s", [rid]).fetchone()[0]
    assert ids == list(range(len(ids)))
    one = t_src.execute("SELECT generalized FROM deid.equivalence_class WHERE release_id = %s"
                        " AND source = 'pathology' ORDER BY class_id LIMIT 1", [rid]).fetchone()[0]
    assert t_src.execute("SELECT count(*) FROM release.t_src_cat WHERE pt = %s",
                         [one["pt"]]).fetchone()[0] > 0


def test_request_fails_when_the_class_catalog_is_not_the_release(t_src):
    """The request-time verifier reads the per-source classes the catalog writer derived from
    the stored release: classes that do not add up to the released rows fail the request (DE002)
    and leave nothing."""
    with rolled_back(t_src):
        t_src.execute("CREATE FUNCTION pg_temp.grow() RETURNS trigger LANGUAGE plpgsql AS"
                      " $$ BEGIN NEW.cardinality := NEW.cardinality + 1; RETURN NEW; END $$")
        t_src.execute("CREATE TRIGGER grow BEFORE INSERT ON deid.equivalence_class FOR EACH ROW"
                      " EXECUTE FUNCTION pg_temp.grow()")
        with pytest.raises(psycopg.Error) as e:
            gen(t_src, "t_src_bad", k=5, selection=None, table="t_src")
    assert sqlstate_of(e) == "DE002"
    assert not t_src.execute("SELECT 1 FROM pg_class WHERE relname = 't_src_bad'").fetchone()


def test_verify_release_groups_the_stored_release(t_src):
    gen(t_src, "t_src_rv", k=5, selection=None, table="t_src")
    report = t_src.execute("SELECT deid.verify_release('t_src_rv')").fetchone()[0]
    assert report["verified"] and set(report["report"]["sources"]) == {"registry", "pathology"}
    for tamper in ["UPDATE deid_release.t_src_rv SET pt = 'x' WHERE ctid = (SELECT min(ctid)"
                   " FROM deid_release.t_src_rv)",                       # a class of 1 in the release
                   "UPDATE deid.equivalence_class SET cardinality = cardinality + 1 WHERE class_id = 0"
                   " AND release_id = (SELECT release_id FROM deid.release WHERE name = 't_src_rv')"]:
        with rolled_back(t_src):
            t_src.execute(tamper)
            with pytest.raises(psycopg.Error) as e:
                t_src.execute("SELECT deid.verify_release('t_src_rv')")
        assert sqlstate_of(e) == "DE002"


def test_verify_release_accepts_a_release_logged_before_1_1(t_src):
    """Releases logged before deid 1.1.0 keep their classes over all quasi-identifiers jointly
    (source NULL, as the upgrade leaves them): deid.verify_release checks them on the stored
    release."""
    rid, *_ = gen(t_src, "t_src_old", k=5, selection=None, table="t_src")
    t_src.execute("DELETE FROM deid.equivalence_class WHERE release_id = %s", [rid])
    t_src.execute("INSERT INTO deid.equivalence_class (release_id, class_id, cardinality, generalized)"
                  " SELECT %s, (row_number() OVER ())::int - 1, count(*), jsonb_build_object('age', age,"
                  " 'sex', sex, 'race', race, 'pt', pt) FROM release.t_src_old GROUP BY age, sex, race, pt",
                  [rid])
    # ... and no digests of its tables (recorded since; the log is append-only, hence the trigger)
    t_src.execute("ALTER TABLE deid.release DISABLE TRIGGER release_append_only")
    t_src.execute("UPDATE deid.release SET metrics = metrics - 'digests' WHERE release_id = %s", [rid])
    t_src.execute("ALTER TABLE deid.release ENABLE TRIGGER release_append_only")
    assert t_src.execute("SELECT deid.verify_release('t_src_old')").fetchone()[0]["verified"]


def test_class_catalog_is_the_stored_release_grouped(t_src):
    """Row for row, the catalog's classes are the stored release grouped per source (count and
    values), class ids running on over the sources (registry, then pathology), within a source
    in the byte order of the values -- whether or not the GROUP BYs ran in parallel."""
    rid, *_ = gen(t_src, "t_src_eq", k=5, selection=None, table="t_src")
    got = t_src.execute("SELECT class_id, cardinality, generalized, source FROM deid.equivalence_class"
                        " WHERE release_id = %s ORDER BY class_id", [rid]).fetchall()
    want, first = [], 0
    for source, cols in (("registry", ["age", "sex", "race"]), ("pathology", ["pt"])):
        rows = t_src.execute(
            f"SELECT %s + (row_number() OVER (ORDER BY"
            f" {', '.join(c + ' COLLATE ' + chr(34) + 'C' + chr(34) for c in cols)}))::int - 1,"
            f" count(*), jsonb_build_object({', '.join(repr(c) + ', ' + c for c in cols)}), %s"
            f" FROM release.t_src_eq GROUP BY {', '.join(cols)} ORDER BY 1", [first, source]).fetchall()
        want += rows
        first += len(rows)
    assert got == want and len(got) > 2


def test_class_catalog_reads_only_a_plain_deid_table(t_src):
    """What the (parallel) class GROUP BYs read with deid_owner's rights: the stored release, a
    deid_owner table of built-in column types without triggers, rules, defaults or RLS."""
    gen(t_src, "t_src_plain", k=5, selection=None, table="t_src")
    owner, rls, triggers, rules = t_src.execute(
        "SELECT c.relowner::regrole::text, c.relrowsecurity OR c.relforcerowsecurity, c.relhastriggers,"
        " c.relhasrules FROM pg_class c WHERE c.oid = 'deid_release.t_src_plain'::regclass").fetchone()
    assert (owner, rls, triggers, rules) == ("deid_owner", False, False, False)
    assert t_src.execute("SELECT count(*) FROM pg_attribute a WHERE a.attrelid ="
                         " 'deid_release.t_src_plain'::regclass AND a.attnum > 0 AND (a.atttypid >= 16384"
                         " OR a.atthasdef)").fetchone()[0] == 0


PLANNER = ("parallel_setup_cost", "parallel_tuple_cost", "min_parallel_table_scan_size",
           "max_parallel_workers_per_gather")


def test_request_leaves_the_callers_planner_settings(t_src):
    """The class GROUP BYs set planner settings for themselves only: within the caller's
    transaction (SET and SET LOCAL values alike) and after it, every setting is what it was."""
    settings = lambda: t_src.execute(  # noqa: E731
        "SELECT array_agg(current_setting(n) ORDER BY n) FROM unnest(%s::text[]) n",
        [list(PLANNER)]).fetchone()[0]
    t_src.execute("SET max_parallel_workers_per_gather = 1")
    t_src.execute("SET min_parallel_table_scan_size = '16MB'")
    try:
        session = settings()
        t_src.execute("BEGIN")
        t_src.execute("SET LOCAL parallel_setup_cost = 12345")
        t_src.execute("SET LOCAL parallel_tuple_cost = 0.5")
        local = settings()
        assert gen(t_src, "t_src_gucs", k=5, selection=None, table="t_src")[5]
        assert settings() == local
        t_src.execute("COMMIT")
        assert settings() == session
    finally:
        t_src.execute("RESET max_parallel_workers_per_gather")
        t_src.execute("RESET min_parallel_table_scan_size")
