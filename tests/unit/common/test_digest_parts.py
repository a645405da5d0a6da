"""table_digest.combine: the digest of a table from the partial sums of disjoint parts of its
rows (a verifier's GROUP BY, an INSERT's RETURNING) is the text one statement over all of
them gives; and the digest statement computes each row's hash once (not once per sum)."""
from deid.verify.shared import table_digest as td


def test_parts_add_up_to_the_one_statement_text():
    parts = [{"digest_n": 2, "digest_1": "-5", "digest_2": "7"},
             {"digest_n": "3", "digest_1": "18446744073709551616", "digest_2": "-9"}]
    assert td.combine(parts) == {"rows": 5, "sums": "18446744073709551611 -2"}


def test_no_rows_have_no_sums():
    assert td.combine([]) == {"rows": 0, "sums": None}
    assert td.combine([{"digest_n": 0, "digest_1": None, "digest_2": None}]) == \
        {"rows": 0, "sums": None}


def test_each_row_hashed_once():
    sql = td._digest_sql("t c", td.ROW_TEXT)
    assert sql.count("hashtextextended") == 1 and td.ONCE in sql
