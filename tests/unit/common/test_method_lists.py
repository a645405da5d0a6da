"""Where the SQL surface and the help speak of the methods, they cannot fall behind the
registry: the COMMENT of deid.anonymize_request names no method (deid.usage, generated from the
registry, lists them), and the help of a distributed source says how every registered method
runs over shards."""
import pathlib
import re

from deid import usage
from deid.methods.registry import METHODS

ROOT = pathlib.Path(__file__).resolve().parents[3]


def comment_of(function):
    for path in [*sorted((ROOT / "sql").glob("*.sql")),
                 *sorted((ROOT / "python_udfs" / "deid" / "methods").glob("*/sql/*.sql"))]:
        m = re.search(rf"COMMENT ON FUNCTION {re.escape(function)}\(.*?\) IS\s*'((?:[^']|'')*)'",
                      path.read_text(), re.S)
        if m:
            return m.group(1)
    raise AssertionError(f"no COMMENT ON FUNCTION {function}")


def test_the_request_comment_leaves_the_method_list_to_usage():
    text = comment_of("deid.anonymize_request")
    assert [m for m in METHODS if re.search(rf"\b{m}\b", text)] == []
    assert "deid.usage(''anonymize_request'')" in text
    assert all(m in usage.usage("anonymize_request") for m in METHODS)


def test_the_distributed_help_names_every_method():
    text = usage.usage("register_distributed_source")
    assert [m for m in METHODS if m not in text] == []


def test_the_docs_lists_of_methods_are_the_registry_s():
    """The request page's method row and links to the methods' options, and the sharding
    page's table of distributions, name exactly the registered methods (a fifth method's
    docs page is linked from them, and its declared DISTRIBUTION is the table's)."""
    requests = (ROOT / "docs" / "requests.md").read_text()
    row = next(line for line in requests.splitlines() if line.startswith("| `method` |"))
    assert set(re.findall(r"`(\w+)`", row.split("|")[2])) == set(METHODS)
    assert set(re.findall(r"\(methods/(\w+)\.md#options\)", requests)) == set(METHODS)
    sharding = (ROOT / "docs" / "sharding.md").read_text()
    table = dict(re.findall(r"^\| (\w+) \(\d+\) \| `(\w+)` \|", sharding, re.M))
    assert table == {name: m.plugin.DISTRIBUTION for name, m in METHODS.items()}
