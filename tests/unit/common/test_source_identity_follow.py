"""The view walk of the composition rule's source identity: a stored query tree (the text of
pg_rewrite.ev_action) is read without running it, and a row-id column is followed to one
relation's column, or refused."""
import pytest

from deid.log import node_tree, source_identity

# CREATE VIEW zv AS SELECT id AS pid, a + 1 AS a1, b FROM (SELECT * FROM zt WHERE a > 1) s
# WHERE b <> 'x'  (PostgreSQL 15; shortened to the fields the walk reads, plus a Const)
VIEW = (
    '({QUERY :commandType 1 :hasAggs false :hasTargetSRFs false :hasRecursive false :cteList <>'
    ' :rtable ({RANGETBLENTRY :alias {ALIAS :aliasname old :colnames <>} :rtekind 0 :relid 16398'
    ' :relkind v} {RANGETBLENTRY :alias {ALIAS :aliasname new :colnames <>} :rtekind 0'
    ' :relid 16398 :relkind v} {RANGETBLENTRY :eref {ALIAS :aliasname s :colnames ("id" "a"'
    ' "b")} :rtekind 1 :subquery {QUERY :commandType 1 :hasAggs false :hasTargetSRFs false'
    ' :cteList <> :rtable ({RANGETBLENTRY :alias <> :rtekind 0 :relid 16391 :relkind r'
    ' :selectedCols (b 8 9 10)}) :jointree {FROMEXPR :fromlist ({RANGETBLREF :rtindex 1})'
    ' :quals {OPEXPR :opno 521 :args ({VAR :varno 1 :varattno 2 :varlevelsup 0} {CONST'
    ' :consttype 23 :constvalue 4 [ 1 0 0 0 0 0 0 0 ]})}} :targetList ({TARGETENTRY :expr'
    ' {VAR :varno 1 :varattno 1 :varlevelsup 0} :resno 1 :resname id :resjunk false})'
    ' :groupClause <> :groupingSets <> :havingQual <> :setOperations <>}}) :jointree {FROMEXPR'
    ' :fromlist ({RANGETBLREF :rtindex 3}) :quals <>} :targetList ({TARGETENTRY :expr {VAR'
    ' :varno 3 :varattno 1 :varlevelsup 0} :resno 1 :resname pid :resjunk false} {TARGETENTRY'
    ' :expr {OPEXPR :opno 551 :args ({VAR :varno 3 :varattno 2 :varlevelsup 0} {CONST'
    ' :consttype 23 :constvalue 4 [ 1 0 0 0 0 0 0 0 ]})} :resno 2 :resname a1 :resjunk false})'
    ' :groupClause <> :groupingSets <> :havingQual <> :setOperations <>})')


def test_the_tree_is_read_as_nodes_lists_and_atoms():
    tree = node_tree.parse(VIEW)
    assert isinstance(tree, list) and tree[0]["_"] == "QUERY"
    assert tree[0]["rtable"][2]["eref"]["colnames"] == ["id", "a", "b"]
    assert tree[0]["rtable"][0]["alias"]["colnames"] is None
    const = tree[0]["targetList"][1]["expr"]["args"][1]
    assert const["constvalue"][0] == "4" and const["consttype"] == "23"


def test_a_renamed_row_id_is_followed_through_a_subquery_to_the_table():
    query = node_tree.parse(VIEW)[0]
    where, (sub, attno) = source_identity.follow(query, 1)
    assert where == "subquery"
    assert source_identity.follow(sub, attno) == ("relation", (16391, 1))


def test_a_computed_column_is_not_a_row_id():
    with pytest.raises(source_identity.Unmapped):
        source_identity.follow(node_tree.parse(VIEW)[0], 2)


@pytest.mark.parametrize("change", [
    (":hasAggs false", ":hasAggs true"),
    (":setOperations <>})", ":setOperations {SETOPERATIONSTMT :op 1}})"),
    ("({RANGETBLREF :rtindex 3})", "({RANGETBLREF :rtindex 3} {RANGETBLREF :rtindex 1})"),
    ("({RANGETBLREF :rtindex 3})", "({JOINEXPR :jointype 0 :larg {RANGETBLREF :rtindex 3}})"),
    (":groupClause <> :groupingSets <> :havingQual <> :setOperations <>})",
     ":groupClause ({SORTGROUPCLAUSE :tleSortGroupRef 1}) :groupingSets <> :havingQual <>"
     " :setOperations <>})"),
])
def test_what_may_repeat_or_merge_rows_is_refused(change):
    # the outer query's: its flags come first in the text, its clauses last
    first = change[0].startswith(":has")
    text = (VIEW.replace(change[0], change[1], 1) if first
            else VIEW[::-1].replace(change[0][::-1], change[1][::-1], 1)[::-1])
    assert text != VIEW
    with pytest.raises(source_identity.Unmapped):
        source_identity.follow(node_tree.parse(text)[0], 1)


def test_escaped_characters_stay_in_their_token():
    assert node_tree.tokens(r'{A :x "a\ b\)c" :y <>}') == ["{", "A", ":x", '"a b)c"', ":y", "<>", "}"]
