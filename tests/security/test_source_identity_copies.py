"""Attacks: the same patients released through a partition, an inheriting table or a
materialized view of the source.

A partition's rows are rows of its partitioned table, an inheriting child's rows are read
through its parent, and a materialized view's rows were copied from its table: each was its
own source for the composition rule, so a hostile requester (a policy, no SELECT) released
the whole table, then the one partition that leaves a patient out, and subtracted. Now a
partition or an inheriting child counts as a release of its topmost ancestor, and a
materialized view as a release of the table its row ids come from (its stored query, walked
as a view's: no code of its owner runs); one whose row ids cannot be traced is refused.
"""
import psycopg
import pytest
from psycopg import sql

from test_source_identity import (RESEARCHER, REFUSED, SECRET, UNMAPPED, anatomy, attempt,
                                  assert_uniform, classify, released)

PATIENT_7 = "(7)"


def _rows(admin, ident):
    admin.execute(sql.SQL(
        "INSERT INTO {} SELECT i, CASE WHEN i = 7 THEN 61 ELSE 20 + (i * 37) % 60 END,"
        " CASE WHEN i = 7 THEN 'M' WHEN i % 2 = 0 THEN 'M' ELSE 'F' END,"
        " CASE WHEN i = 7 THEN 10133 ELSE 10100 + (i * 53) % 30 END,"
        " CASE WHEN i = 7 THEN {} ELSE 'D' || ((i * 7919) % 5) END"
        " FROM generate_series(1, 200) i").format(ident, sql.Literal(SECRET)))


COLUMNS = "(id int NOT NULL, age int NOT NULL, sex text NOT NULL, zip int NOT NULL, dx text NOT NULL)"


@pytest.fixture
def partitioned(admin):
    """sidp_all partitioned by id: sidp_seven holds patient 7 alone, sidp_rest the others."""
    admin.execute("DROP TABLE IF EXISTS public.sidp_all CASCADE")
    admin.execute("CREATE TABLE public.sidp_all " + COLUMNS + " PARTITION BY LIST (id)")
    admin.execute("ALTER TABLE public.sidp_all ADD PRIMARY KEY (id)")
    admin.execute("CREATE TABLE public.sidp_seven PARTITION OF public.sidp_all FOR VALUES IN (7)")
    admin.execute("CREATE TABLE public.sidp_rest PARTITION OF public.sidp_all DEFAULT")
    _rows(admin, sql.Identifier("public", "sidp_all"))
    for rel in ("public.sidp_all", "public.sidp_rest"):
        classify(admin, rel)
    yield
    admin.execute("DROP TABLE IF EXISTS public.sidp_all CASCADE")


@pytest.fixture
def inherited(admin):
    """sidi_parent holds patient 7; its child sidi_child the 199 others (read through it)."""
    admin.execute("DROP TABLE IF EXISTS public.sidi_parent CASCADE")
    admin.execute("CREATE TABLE public.sidi_parent " + COLUMNS)
    admin.execute("CREATE TABLE public.sidi_child () INHERITS (public.sidi_parent)")
    for t in ("sidi_parent", "sidi_child"):
        admin.execute(sql.SQL("ALTER TABLE {} ADD PRIMARY KEY (id)").format(
            sql.Identifier("public", t)))
    _rows(admin, sql.Identifier("public", "sidi_child"))
    admin.execute("WITH m AS (DELETE FROM public.sidi_child WHERE id = 7 RETURNING *)"
                  " INSERT INTO public.sidi_parent SELECT * FROM m")
    for rel in ("public.sidi_parent", "public.sidi_child"):
        classify(admin, rel)
    yield
    admin.execute("DROP TABLE IF EXISTS public.sidi_parent CASCADE")


@pytest.fixture
def table_and_copy(admin):
    """sidm_t (200 patients) and a materialized view of all its patients but patient 7."""
    admin.execute("DROP TABLE IF EXISTS public.sidm_t CASCADE")
    admin.execute("CREATE TABLE public.sidm_t " + COLUMNS)
    admin.execute("ALTER TABLE public.sidm_t ADD PRIMARY KEY (id)")
    _rows(admin, sql.Identifier("public", "sidm_t"))
    admin.execute("CREATE MATERIALIZED VIEW public.sidm_copy AS"
                  " SELECT id AS pid, age, sex, zip, dx FROM public.sidm_t WHERE zip <> 10133")
    for rel in ("public.sidm_t", "public.sidm_copy"):
        classify(admin, rel)
    yield
    admin.execute("DROP TABLE IF EXISTS public.sidm_t CASCADE")


def _second_refused(admin, got, names):
    assert not isinstance(got[0], psycopg.Error), got[0]
    assert isinstance(got[1], psycopg.Error), "the patient's one-row difference was released"
    assert_uniform(got[1])
    assert released(admin, names[1]) == 0


def test_a_partition_is_a_release_of_its_partitioned_table(partitioned, connect, admin):
    """All 200 patients of the partitioned table, then its partition of the 199 others:
    the difference is patient 7 (refused, uniformly)."""
    r = connect(RESEARCHER)
    names = ["sidp_whole", "sidp_part"]
    got = [attempt(r, "public.sidp_all", names[0], row_id="id"),
           attempt(r, "public.sidp_rest", names[1], row_id="id")]
    _second_refused(admin, got, names)
    assert admin.execute("SELECT relation FROM deid.release_identity i JOIN deid.release r"
                         " USING (release_id) WHERE r.name = %s", [names[0]]).fetchone() == (
        "public.sidp_all",)


def test_an_inheriting_child_is_a_release_of_its_parent(inherited, connect, admin):
    """The parent (read with its child: 200 patients), then the child alone (199)."""
    r = connect(RESEARCHER)
    names = ["sidi_whole", "sidi_part"]
    got = [attempt(r, "public.sidi_parent", names[0], row_id="id"),
           attempt(r, "public.sidi_child", names[1], row_id="id")]
    _second_refused(admin, got, names)


def test_a_materialized_view_is_a_release_of_its_table(table_and_copy, connect, admin):
    """The table, then a materialized copy of it without patient 7 (its row id renamed)."""
    r = connect(RESEARCHER)
    names = ["sidm_whole", "sidm_part"]
    got = [attempt(r, "public.sidm_t", names[0], row_id="id"),
           attempt(r, "public.sidm_copy", names[1], row_id="pid")]
    _second_refused(admin, got, names)


def test_a_materialized_view_whose_row_ids_cannot_be_traced_is_refused(
        table_and_copy, connect, admin):
    admin.execute("DROP MATERIALIZED VIEW IF EXISTS public.sidm_joined")
    admin.execute("CREATE MATERIALIZED VIEW public.sidm_joined AS SELECT a.id, a.age, a.sex,"
                  " a.zip, b.dx FROM public.sidm_t a JOIN public.sidm_t b USING (id)")
    classify(admin, "public.sidm_joined")
    got = attempt(connect(RESEARCHER), "public.sidm_joined", "sidm_joined_r", row_id="id")
    assert isinstance(got, psycopg.Error) and got.diag.sqlstate == UNMAPPED
    assert got.diag.message_hint
    assert released(admin, "sidm_joined_r") == 0
