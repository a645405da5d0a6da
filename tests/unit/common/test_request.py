"""Selection parsing (002 sec. 4.4): strict whitelist, quoted identifiers, bound literals."""

import re

import pytest
from hypothesis import given, settings, strategies as st

from deid.errors import (DeidError, FEATURE_NOT_SUPPORTED, INVALID_PARAMETER_VALUE, SYNTAX_ERROR,
                         UNDEFINED_COLUMN)
from deid.request.selection import parse_selection, quote_ident

COLS = {
    "age": "integer",
    "sex": "character varying(1)",
    "zip": "text",
    "pt": "text",
    "d": "date",
    "w": "numeric(6,2)",
    "flag": "boolean",
    "c": "character(3)",
    'we"ird': "text",
    "Mixed": "text",
}


def render(text, expand=None, columns=COLS):
    return parse_selection(text, columns).render(expand)


def test_quote_ident():
    assert quote_ident("age") == '"age"'
    assert quote_ident('a"b') == '"a""b"'
    assert quote_ident('x"; DROP TABLE t; --') == '"x""; DROP TABLE t; --"'
    for bad in ("", None, "a\x00b"):
        with pytest.raises(DeidError):
            quote_ident(bad)


@pytest.mark.parametrize("text, sql, params", [
    ("age >= 18 AND sex = 'F'", '("age" >= $1::integer AND "sex" = $2::character varying)', ["18", "F"]),
    ("Age>=18", '"age" >= $1::integer', ["18"]),
    ("18 <= age", '"age" >= $1::integer', ["18"]),                         # literal first: flipped
    ("age != -5", '"age" <> $1::integer', ["-5"]),
    ("age <> 5.5", '"age" <> $1::integer', ["5.5"]),
    ("w < .5", '"w" < $1::numeric', ["0.5"]),                              # typmod dropped: no rounding
    ("d > '2020-01-31'", '"d" > $1::date', ["2020-01-31"]),
    ("c = 'ab'", '"c" = $1::bpchar', ["ab"]),
    ("zip IN ('8010', '8020') OR NOT (age < 3)",
     '("zip" IN ($1::text, $2::text) OR (NOT "age" < $3::integer))', ["8010", "8020", "3"]),
    ("zip NOT IN ('1')", '"zip" <> $1::text', ["1"]),
    ("age BETWEEN 1 AND 9", '"age" BETWEEN $1::integer AND $2::integer', ["1", "9"]),
    ("NOT age BETWEEN 1 AND 9", '"age" NOT BETWEEN $1::integer AND $2::integer', ["1", "9"]),
    ("age IS NULL OR zip IS NOT NULL", '("age" IS NULL OR "zip" IS NOT NULL)', []),
    ("NOT (age IS NULL)", '"age" IS NOT NULL', []),
    ("flag", '"flag"', []),
    ("NOT flag AND flag = FALSE", '((NOT "flag") AND "flag" = $1::boolean)', ["false"]),
    ("(age = 1 AND (sex = 'M' AND zip = 'x')) OR age = 2",
     '(("age" = $1::integer AND ("sex" = $2::character varying AND "zip" = $3::text)) OR "age" = $4::integer)',
     ["1", "M", "x", "2"]),
    ("a = 1 AND b = 2".replace("a", "age").replace("b", "zip"),
     '("age" = $1::integer AND "zip" = $2::text)', ["1", "2"]),
    ('"we""ird" = \'it\'\'s\'', '"we""ird" = $1::text', ["it's"]),
    ('"Mixed" = \'x\'', '"Mixed" = $1::text', ["x"]),
    ("zip = 'x; DROP TABLE t; --'", '"zip" = $1::text', ["x; DROP TABLE t; --"]),
    ("zip = '$1::text'", '"zip" = $1::text', ["$1::text"]),
    ("pt = 1", '"pt" = $1::text', ["1"]),
])
def test_render_exact(text, sql, params):
    assert render(text) == (sql, params)


def test_render_start_offset():
    assert parse_selection("age = 1 AND zip = '2'", COLS).render(start=3) == \
        ('("age" = $3::integer AND "zip" = $4::text)', ["1", "2"])


@pytest.mark.parametrize("text, sqlstate, fragment", [
    ("1=1; DROP TABLE x", SYNTAX_ERROR, "';'"),
    ("age = 1;", SYNTAX_ERROR, "';'"),
    ("age IN (SELECT 1)", FEATURE_NOT_SUPPORTED, "subquer"),
    ("age = (SELECT max(age) FROM t)", FEATURE_NOT_SUPPORTED, "subquer"),
    ("EXISTS (SELECT 1)", FEATURE_NOT_SUPPORTED, "subquer"),
    ("age = 1 UNION SELECT 1", FEATURE_NOT_SUPPORTED, "subquer"),
    ("age < ALL (SELECT 1)", FEATURE_NOT_SUPPORTED, "subquer"),
    ("upper(sex) = 'F'", FEATURE_NOT_SUPPORTED, "function calls are not allowed in a selection: UPPER(sex)"),
    ("pg_sleep(10) IS NULL", FEATURE_NOT_SUPPORTED, "PG_SLEEP(10)"),
    ("d = CURRENT_DATE", FEATURE_NOT_SUPPORTED, "function"),
    ("age::text = '1'", FEATURE_NOT_SUPPORTED, "'::'"),
    ("CAST(age AS text) = '1'", FEATURE_NOT_SUPPORTED, "casts are not allowed in a selection: CAST(age AS TEXT)"),
    ("d = DATE '2020-01-01'", FEATURE_NOT_SUPPORTED, "cast"),
    ("age = 1 -- comment", SYNTAX_ERROR, "comments are not allowed"),
    ("age /* c */ = 1", SYNTAX_ERROR, "comments are not allowed"),
    ("salary = 1", UNDEFINED_COLUMN, "'salary'"),
    ("mixed = 'x'", UNDEFINED_COLUMN, "'mixed'"),
    ("sex LIKE 'F%'", FEATURE_NOT_SUPPORTED, "pattern matching"),
    ("sex ~ 'F'", FEATURE_NOT_SUPPORTED, "pattern matching"),
    ("age + 1 = 2", FEATURE_NOT_SUPPORTED, "operator not allowed in a selection: age + 1"),
    ("age = zip", FEATURE_NOT_SUPPORTED, "column-to-column"),
    ("age = salary", UNDEFINED_COLUMN, "'salary'"),
    ("1 = 1", FEATURE_NOT_SUPPORTED, "must involve a column"),
    ("TRUE", FEATURE_NOT_SUPPORTED, "literal"),
    ("age", FEATURE_NOT_SUPPORTED, "not boolean"),
    ("age = NULL", FEATURE_NOT_SUPPORTED, "comparison with NULL"),
    ("age IN (1, NULL)", FEATURE_NOT_SUPPORTED, "NULL"),
    ("flag IS TRUE", FEATURE_NOT_SUPPORTED, "IS NULL"),
    ("age IS DISTINCT FROM 1", FEATURE_NOT_SUPPORTED, "IS DISTINCT FROM"),
    ("age BETWEEN SYMMETRIC 1 AND 2", FEATURE_NOT_SUPPORTED, "symmetric"),
    ("t.age = 1", FEATURE_NOT_SUPPORTED, "qualified"),
    ("age = 1 x", SYNTAX_ERROR, "unexpected text"),
    ("age = $1", FEATURE_NOT_SUPPORTED, "parameters"),
    ("zip = E'\\x41'", FEATURE_NOT_SUPPORTED, "ByteString"),
    ("zip = $$x$$", FEATURE_NOT_SUPPORTED, "RawString"),
    ("age = - -1", FEATURE_NOT_SUPPORTED, "operator"),
    ("(age, zip) IN ((1, '2'))", FEATURE_NOT_SUPPORTED, "Tuple"),
    ("age = ARRAY[1]", FEATURE_NOT_SUPPORTED, "Array"),
    ("zip = 'a' COLLATE \"C\"", FEATURE_NOT_SUPPORTED, "Collate"),
    ("age = 1 AND", SYNTAX_ERROR, "syntax error"),
    ("age = 'unterminated", SYNTAX_ERROR, "tokenize"),
    ("", INVALID_PARAMETER_VALUE, "empty"),
    ("   \n", INVALID_PARAMETER_VALUE, "empty"),
    (None, INVALID_PARAMETER_VALUE, "empty"),
    ("age = 1\x00", INVALID_PARAMETER_VALUE, "NUL"),
])
def test_rejected(text, sqlstate, fragment):
    with pytest.raises(DeidError) as e:
        parse_selection(text, COLS)
    assert e.value.sqlstate == sqlstate, e.value.message
    assert fragment.lower() in e.value.message.lower(), e.value.message


def test_rejection_hints():
    with pytest.raises(DeidError) as e:
        parse_selection("mixed = 'x'", COLS)
    assert '"Mixed"' in e.value.hint
    with pytest.raises(DeidError) as e:
        parse_selection("nope = 'x'", {"a": "text", "b": "text"})
    assert e.value.hint == "Allowed columns: a, b"
    with pytest.raises(DeidError) as e:
        parse_selection("age = NULL", COLS)
    assert "IS NULL" in e.value.hint


def test_too_long_and_too_deep():
    with pytest.raises(DeidError) as e:
        parse_selection("age = 1 OR " * 20000 + "age = 2", COLS)
    assert e.value.sqlstate == INVALID_PARAMETER_VALUE
    with pytest.raises(DeidError):
        parse_selection("(" * 3000 + "age = 1" + ")" * 3000, COLS)
    # long flat chains are fine (no recursion per AND/OR item)
    sql, params = parse_selection(" OR ".join(f"age = {i}" for i in range(2000)), COLS).render()
    assert len(params) == 2000 and sql.count("$") == 2000


@pytest.mark.parametrize("typ", ["text; DROP TABLE t", "integer)--", "a'b"])
def test_unbindable_column_type(typ):
    with pytest.raises(DeidError) as e:
        parse_selection("x = 1", {"x": typ})
    assert e.value.sqlstate == FEATURE_NOT_SUPPORTED


@pytest.mark.parametrize("typ, cast", [
    ("character varying(10)", "character varying"), ("numeric(10,2)", "numeric"),
    ("timestamp(3) without time zone", "timestamp without time zone"), ("integer[]", "integer[]"),
    ('"MyEnum"', '"MyEnum"'), ("public.mood", "public.mood"), ("bit(3)", "bit varying"),
    ("character(5)[]", "bpchar[]"), ("double precision", "double precision"),
])
def test_cast_types(typ, cast):
    assert parse_selection("x = '1'", {"x": typ}).render() == (f'"x" = $1::{cast}', ["1"])


# ----------------------------------------------------------------------------------------------
# 002 sec. 5.2 step 1: a generalized value matches its leaves

PT_LEAVES = {"1": ["1a", "1b", "1c", "1mic"], "[1-2]": ["1a", "1b", "1c", "1mic", "2"], "9": []}


def expand(column, value):
    return PT_LEAVES.get(value) if column == "pt" else None


@pytest.mark.parametrize("text, sql, params", [
    ("pt = '1'", '"pt" IN ($1::text, $2::text, $3::text, $4::text)', ["1a", "1b", "1c", "1mic"]),
    ("pt <> '1'", '"pt" NOT IN ($1::text, $2::text, $3::text, $4::text)', ["1a", "1b", "1c", "1mic"]),
    ("NOT pt = '1'", '(NOT "pt" IN ($1::text, $2::text, $3::text, $4::text))', ["1a", "1b", "1c", "1mic"]),
    ("pt IN ('1', '2', '1a')", '"pt" IN ($1::text, $2::text, $3::text, $4::text, $5::text)',
     ["1a", "1b", "1c", "1mic", "2"]),
    ("pt NOT IN ('[1-2]')", '"pt" NOT IN ($1::text, $2::text, $3::text, $4::text, $5::text)',
     ["1a", "1b", "1c", "1mic", "2"]),
    ("pt = '1a'", '"pt" = $1::text', ["1a"]),                    # a leaf stands for itself
    ("pt = '9'", "FALSE", []),                                  # expands to nothing
    ("pt <> '9'", '("pt" IS NOT NULL)', []),
    ("pt > '1'", '"pt" > $1::text', ["1"]),                     # ordering is never expanded
    ("zip = '1'", '"zip" = $1::text', ["1"]),                    # other columns untouched
    ("Localisation = 'Mamma' AND PT = 1 AND G = 1".replace("Localisation", "zip").replace("G ", "age "),
     '("zip" = $1::text AND "pt" IN ($2::text, $3::text, $4::text, $5::text) AND "age" = $6::integer)',
     ["Mamma", "1a", "1b", "1c", "1mic", "1"]),
])
def test_expand(text, sql, params):
    assert render(text, expand) == (sql, params)


def test_equalities():
    cols = {"localisation": "text", "pt": "text", "g": "text", "r": "text"}
    eq = lambda t: parse_selection(t, cols).equalities()
    assert eq("Localisation='Mamma' AND PT='1' AND G='1'") == {"localisation": {"Mamma"}, "pt": {"1"}, "g": {"1"}}
    assert eq("localisation = 'Mamma' OR pt = '1'") == {}
    assert eq("NOT (pt = '1') AND g = '1'") == {"g": {"1"}}
    assert eq("pt IN ('1', '2') AND (g = '1' AND r IN ('0'))") == {"pt": {"1", "2"}, "g": {"1"}, "r": {"0"}}
    assert eq("pt IN ('1', '2') AND pt = '2'") == {"pt": {"2"}}
    assert eq("pt = '1' AND pt = '2'") == {"pt": set()}
    assert eq("pt NOT IN ('1') AND g <> '1' AND r > '0'") == {}
    assert eq("g = '1' AND (pt = '1' OR r = '0')") == {"g": {"1"}}
    assert eq("pt = 1") == {"pt": {"1"}}
    s = parse_selection("pt = '1' AND r IS NULL", cols)
    assert s.columns == frozenset({"pt", "r"})


# ----------------------------------------------------------------------------------------------
# user text never reaches SQL: every literal is a parameter, identifiers are quoted

@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.lists(st.text(alphabet=st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)),
                        min_size=1, max_size=20), min_size=1, max_size=5),
       st.sampled_from(["=", "<>", "<", ">=", "IN"]))
def test_literals_are_always_bound(values, op):
    def lit(v):
        return "'" + v.replace("'", "''") + "'"
    text = f"zip IN ({', '.join(lit(v) for v in values)})" if op == "IN" else \
        " OR ".join(f"zip {op} {lit(v)}" for v in values)
    try:
        sel = parse_selection(text, COLS)
    except DeidError as e:  # e.g. a value that looks like a comment to the tokenizer never gets through
        assert e.sqlstate in (SYNTAX_ERROR, FEATURE_NOT_SUPPORTED)
        return
    sql, params = sel.render()
    assert params == values
    # nothing but our own tokens: quoted identifiers, placeholders, keywords, operators
    leftover = re.sub(r'"zip"|\$\d+::text|\b(IN|OR|AND|NOT)\b|<>|>=|<=|[=<>(),\s]', "", sql)
    assert leftover == ""
