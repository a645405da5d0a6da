"""Attacks: who reads a release, and which releases are read together.

A release is readable by its audience (deid_reader by default, or options.audience) and by
its requester. The composition rule compares it with the releases of its source that some
role reads together with it (memberships resolved). Attacks:

- a requester (or a reader) widens an audience itself with deid.grant_release: only a
  deid_admin may, and only deid's functions write deid.release_audience;
- a deid_admin grants a study's release to deid_reader, whose members read an earlier release
  of the same source that differs from it by one patient: refused uniformly, nothing granted;
- a requester names an audience it does not belong to: refused before anything is read.

And what must go through: two releases of one source whose audiences share no role (two
studies that never see each other's releases), shown in the report with their audiences.
"""
import re

import psycopg
import pytest
from psycopg import sql

from dbfixtures import sqlstate_of

RESEARCHER = "deid_t_researcher"          # a policy, no SELECT, no deid_reader
READER = "deid_t_reader"                  # a deid_reader
ADMIN = "deid_t_admin"
STUDY = "deid_t_study_a"                  # NOLOGIN: study A's audience
STUDY_RESEARCHER = "deid_t_study_researcher"   # login, member of study A, a policy
STUDY_READER = "deid_t_study_reader"      # login, member of study A only
REFUSED = "DE001"


@pytest.fixture(scope="module")
def roles(admin):
    for role, login in ((STUDY, False), (STUDY_RESEARCHER, True), (STUDY_READER, True)):
        if not admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role]).fetchone():
            admin.execute(sql.SQL("CREATE ROLE {} " + ("LOGIN" if login else "NOLOGIN")).format(
                sql.Identifier(role)))
    for member in (STUDY_RESEARCHER, STUDY_READER):
        admin.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(STUDY),
                                                       sql.Identifier(member)))
    return admin


@pytest.fixture
def source(roles, request):
    """200 patients; patient 7 alone has zip 10133. Both researchers hold policies (k >= 5)."""
    admin = roles
    table = "aud_" + re.sub(r"[^a-z0-9]", "", request.node.name.lower())[-30:]
    ident = sql.Identifier("public", table)
    admin.execute(sql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(ident))
    admin.execute(sql.SQL("CREATE TABLE {} (id int PRIMARY KEY, age int NOT NULL,"
                          " zip int NOT NULL, dx text NOT NULL)").format(ident))
    admin.execute(sql.SQL(
        "INSERT INTO {} SELECT i, 20 + (i * 37) % 60,"
        " CASE WHEN i = 7 THEN 10133 ELSE 10100 + (i * 53) % 30 END, 'D' || ((i * 7919) % 5)"
        " FROM generate_series(1, 200) i").format(ident))
    qualified = f"public.{table}"
    admin.execute("SELECT deid.set_role(%s, 'age', 'quasi_identifier')", [qualified])
    admin.execute("SELECT deid.set_role(%s, 'zip', 'quasi_identifier')", [qualified])
    admin.execute("SELECT deid.set_role(%s, 'dx', 'sensitive')", [qualified])
    for role in (RESEARCHER, STUDY_RESEARCHER):
        admin.execute("SELECT deid.allow_requests(%s, %s, 5)", [role, qualified])
    yield qualified, table
    admin.execute(sql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(ident))


def anatomy(conn, source, release, selection=None, audience=None):
    options = '{"audience": "%s"}' % audience if audience else "{}"
    return conn.execute(
        "SELECT * FROM deid.anonymize_request(%s, 'anatomy', k => 5, l => 2,"
        " columns => '{age,zip,dx}', selection => %s, options => %s, release => %s)",
        [source, selection, options, release]).fetchone()


def reads(conn, release):
    try:
        conn.execute(sql.SQL("SELECT count(*) FROM {}").format(
            sql.Identifier("release", release + "_dx"))).fetchone()
        return True
    except psycopg.errors.InsufficientPrivilege:
        return False


def audience_rows(admin, release):
    return sorted(r[0] for r in admin.execute(
        "SELECT a.audience::text FROM deid.release_audience a JOIN deid.release r"
        " USING (release_id) WHERE r.name = %s AND a.revoked_at IS NULL", [release]).fetchall())


def two_studies(source, connect):
    """Release 1 (all rows) to deid_reader; release 2 (all but patient 7) to study A only."""
    rel, table = source
    first, second = f"{table}_1", f"{table}_2"
    assert anatomy(connect(RESEARCHER), rel, first)[5]
    assert anatomy(connect(STUDY_RESEARCHER), rel, second, selection="zip <> 10133",
                   audience=STUDY)[5]
    return first, second


def test_audiences_that_share_no_role_are_not_composed(source, connect, admin):
    """Two releases differing by one patient, read by audiences with no role in common: both
    go through; each audience reads only its own, and the report shows the audience."""
    first, second = two_studies(source, connect)
    reader, study = connect(READER), connect(STUDY_READER)
    assert reads(reader, first) and not reads(reader, second)
    assert reads(study, second) and not reads(study, first)
    assert audience_rows(admin, first) == ["deid_reader"]
    assert audience_rows(admin, second) == [STUDY]
    shown = connect(ADMIN).execute("SELECT deid.report_source(%s)", [second]).fetchone()[0]
    assert [a["role"] for a in shown["audience"]] == [STUDY]


def test_only_a_deid_admin_grants_or_revokes(source, connect, admin):
    """The requester, a reader, a study member: 42501 with a hint; the catalog rows are
    deid's (no role writes deid.release_audience directly)."""
    _, second = two_studies(source, connect)
    for role in (STUDY_RESEARCHER, READER, STUDY_READER, RESEARCHER):
        for fn in ("grant_release", "revoke_release"):
            with pytest.raises(psycopg.Error) as e:
                connect(role).execute(f"SELECT deid.{fn}(%s, %s)", [second, READER])
            assert sqlstate_of(e) == "42501" and e.value.diag.message_hint
        with pytest.raises(psycopg.Error) as e:
            connect(role).execute("INSERT INTO deid.release_audience (release_id, audience,"
                                  " granted_by) VALUES (1, 'public', 'x')")
        assert sqlstate_of(e) == "42501"
    assert not reads(connect(READER), second)


@pytest.mark.parametrize("widened", ["deid_reader", "PUBLIC", READER])
def test_a_grant_that_joins_the_audiences_is_refused(source, connect, admin, widened):
    """deid_reader's members read release 1; granting release 2 to them (or to everyone, or
    to one of them) would let them subtract the two (patient 7's diagnosis): refused
    uniformly, nothing granted, nothing logged."""
    _, second = two_studies(source, connect)
    with pytest.raises(psycopg.Error) as e:
        connect(ADMIN).execute("SELECT deid.grant_release(%s, %s)", [second, widened])
    d = e.value.diag
    assert d.sqlstate == REFUSED and d.message_hint and d.message_detail is None
    assert not re.search(r"\d", d.message_primary + " " + d.message_hint)
    assert not reads(connect(READER), second)
    assert audience_rows(admin, second) == [STUDY]


def test_a_grant_that_keeps_the_rule_goes_through_and_a_revoke_keeps_the_audience(
        source, connect, admin):
    """A grant to a role that reads nothing else of the source: a real GRANT; the revoke takes
    the privilege away but the role stays in the audience the rule compares."""
    rel, table = source
    only = f"{table}_only"
    assert anatomy(connect(STUDY_RESEARCHER), rel, only, audience=STUDY)[5]
    assert not reads(connect(READER), only)
    connect(ADMIN).execute("SELECT deid.grant_release(%s, 'deid_reader')", [only])
    assert reads(connect(READER), only)
    assert audience_rows(admin, only) == ["deid_reader", STUDY]
    connect(ADMIN).execute("SELECT deid.revoke_release(%s, 'deid_reader')", [only])
    assert not reads(connect(READER), only)
    kept = admin.execute("SELECT revoked_by::text FROM deid.release_audience a JOIN deid.release"
                         " r USING (release_id) WHERE r.name = %s AND audience = 'deid_reader'",
                         [only]).fetchone()
    assert kept == (ADMIN,)
    # deid_reader still counts: a release of the same rows but patient 7 to deid_reader is refused
    with pytest.raises(psycopg.Error) as e:
        anatomy(connect(RESEARCHER), rel, f"{table}_near", selection="zip <> 10133")
    assert sqlstate_of(e) == REFUSED


def test_a_membership_that_joins_the_audiences_counts(source, connect, admin):
    """Memberships are followed: once a deid_reader is also made a member of study A, the two
    audiences meet through that role, and study A's near copy of release 1 is refused."""
    rel, table = source
    assert anatomy(connect(RESEARCHER), rel, f"{table}_1")[5]
    admin.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(STUDY), sql.Identifier(READER)))
    try:
        with pytest.raises(psycopg.Error) as e:
            anatomy(connect(STUDY_RESEARCHER), rel, f"{table}_2", selection="zip <> 10133",
                    audience=STUDY)
        assert sqlstate_of(e) == REFUSED
    finally:
        admin.execute(sql.SQL("REVOKE {} FROM {}").format(sql.Identifier(STUDY),
                                                         sql.Identifier(READER)))


def test_an_audience_the_requester_does_not_belong_to_is_refused(source, connect, admin):
    rel, table = source
    with pytest.raises(psycopg.Error) as e:
        anatomy(connect(RESEARCHER), rel, f"{table}_x", audience=STUDY)
    assert sqlstate_of(e) == "42501" and e.value.diag.message_hint
    assert not admin.execute("SELECT count(*) FROM deid.release WHERE name = %s",
                             [f"{table}_x"]).fetchone()[0]


def release_id(admin, name):
    return admin.execute("SELECT release_id FROM deid.release WHERE name = %s",
                         [name]).fetchone()[0]


def refused_read(conn, release):
    """The SQLSTATE and hint of reading `release`'s diagnosis table, or None when it reads."""
    try:
        conn.execute(sql.SQL("SELECT count(*) FROM {}").format(
            sql.Identifier("release", release + "_dx"))).fetchone()
        return None
    except psycopg.Error as e:
        return e.diag.sqlstate, e.diag.message_hint


def test_a_later_membership_stops_the_release_never_checked_with_the_other(
        source, connect, admin):
    """Two studies' releases that differ by one patient were allowed because their audiences
    shared no role. A later GRANT of study A to a deid_reader (outside deid) would let that
    reader subtract them: the later release, never checked against the earlier one, no longer
    reads for a role that also reads the earlier one (42501 with a hint, no count, no release
    named); its study keeps reading it, and the reader keeps the earlier release."""
    first, second = two_studies(source, connect)
    admin.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(STUDY), sql.Identifier(READER)))
    try:
        reader = connect(READER)
        assert reads(reader, first)
        state, hint = refused_read(reader, second)
        assert state == "42501" and hint and first not in hint
        with pytest.raises(psycopg.Error) as e:      # called directly: no release's name
            reader.execute("SELECT deid._release_readable(%s)", [release_id(admin, second)])
        assert sqlstate_of(e) == "42501" and second not in e.value.diag.message_primary
        with pytest.raises(psycopg.Error) as e:
            reader.execute(sql.SQL("SELECT count(*) FROM {}").format(
                sql.Identifier("release", second + "_estimate"))).fetchone()
        assert sqlstate_of(e) in ("42501", "42P01")
        assert reads(connect(STUDY_READER), second)
    finally:
        admin.execute(sql.SQL("REVOKE {} FROM {}").format(sql.Identifier(STUDY),
                                                         sql.Identifier(READER)))
    assert reads(connect(STUDY_READER), second) and not reads(connect(READER), second)


def test_a_noinherit_membership_is_a_membership(source, connect, admin):
    """A login that inherits nothing (NOINHERIT) but may SET ROLE to deid_reader and to study
    A reads both releases in one session: the later release is refused to it as well."""
    first, second = two_studies(source, connect)
    login = "deid_t_noinherit"
    if not admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [login]).fetchone():
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN NOINHERIT").format(sql.Identifier(login)))
    for role in ("deid_reader", STUDY):
        admin.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(role),
                                                       sql.Identifier(login)))
    try:
        conn = connect(login)
        conn.execute("SET ROLE deid_reader")
        assert reads(conn, first)
        conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(STUDY)))
        assert refused_read(conn, second)[0] == "42501"
    finally:
        admin.execute(sql.SQL("REVOKE {} FROM {}").format(sql.Identifier(STUDY),
                                                         sql.Identifier(login)))


def test_a_grant_that_rechecks_the_later_release_makes_it_readable_again(
        source, connect, admin):
    """A release apart from an earlier one (audiences that met later by a membership) is
    re-checked by deid.grant_release: when the rule holds for the two, the later release
    reads again for the role that reads both."""
    rel, table = source
    first, later = f"{table}_1", f"{table}_young"
    assert anatomy(connect(RESEARCHER), rel, first)[5]
    assert anatomy(connect(STUDY_RESEARCHER), rel, later, selection="age < 50",
                   audience=STUDY)[5]
    admin.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(STUDY), sql.Identifier(READER)))
    try:
        assert refused_read(connect(READER), later)[0] == "42501"
        connect(ADMIN).execute("SELECT deid.grant_release(%s, 'deid_reader')", [later])
        assert refused_read(connect(READER), later) is None
    finally:
        admin.execute(sql.SQL("REVOKE {} FROM {}").format(sql.Identifier(STUDY),
                                                         sql.Identifier(READER)))
