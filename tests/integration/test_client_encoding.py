"""A request from a session whose client_encoding is not the server's: the release's text must
be the source's text (the writer's binary COPY and the verifier's digests must not depend on the
caller's client_encoding)."""
import psycopg
import pytest

VALUES = ["Zürich", "Genève", "Ålesund", "Łódź", "plain"]      # all in LATIN1 but Łódź


@pytest.fixture(scope="module")
def accented(admin):
    admin.execute("DROP TABLE IF EXISTS public.t_accent CASCADE")
    admin.execute("CREATE TABLE public.t_accent (id int PRIMARY KEY, age int, town text,"
                  " diagnosis text)")
    admin.execute("INSERT INTO t_accent SELECT i, 20 + i %% 50, (%s::text[])[1 + i %% 5],"
                  " (%s::text[])[1 + (i / 7) %% 5] FROM generate_series(1, 400) i", [VALUES, VALUES])
    for col, role in [("age", "quasi_identifier"), ("town", "quasi_identifier"),
                      ("diagnosis", "sensitive")]:
        admin.execute("SELECT deid.set_role('t_accent', %s, %s)", [col, role])
    return admin


@pytest.mark.parametrize("encoding", ["LATIN1", "UTF8", "SQL_ASCII"])
def test_release_text_is_the_source_text(url, accented, encoding):
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"SET client_encoding = {encoding}")
        conn.execute("SELECT * FROM deid.anonymize_request('t_accent', 'anatomy', k => 5, l => 3,"
                     " columns => '{age,town,diagnosis}',"
                     " options => '{\"seed\": 3, \"replace\": true}', release => 't_accent_r')")
    # read back in UTF8, the server's encoding
    assert accented.execute("SELECT count(*) FROM ((SELECT age, town FROM t_accent EXCEPT ALL"
                            " SELECT age, town FROM release.t_accent_r_qit) UNION ALL"
                            " (SELECT age, town FROM release.t_accent_r_qit EXCEPT ALL"
                            " SELECT age, town FROM t_accent)) d").fetchone()[0] == 0
    assert sorted(r[0] for r in accented.execute(
        "SELECT DISTINCT diagnosis FROM release.t_accent_r_diagnosis")) == sorted(VALUES)
    assert accented.execute("SELECT deid.verify_release('t_accent_r')").fetchone()[0]
