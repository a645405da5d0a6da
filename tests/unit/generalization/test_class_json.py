"""The class catalog's generalized values (catalog_log.generalized_json): the text of
json.dumps of each class's dict of labels, built once per distinct label."""
import json

from deid.log.release_log import generalized_json


def test_generalized_json_is_json_dumps_of_each_class():
    labels = {"birth_date": ["[1934-03-23-1935-05-03]", "1950-01-01", "1950-01-01"],
              'we"ird %s name': ["{a,b}", "100%", 'quote " and \\ back'],
              "zip": ["é, ü", "NULL", "\u2603 snow"],
              "n": [None, 3, 2.5]}
    got = generalized_json(labels, 3)
    want = [json.dumps({q: labels[q][i] for q in labels}) for i in range(3)]
    assert got == want
    assert all(json.loads(g) == {q: labels[q][i] for q in labels} for i, g in enumerate(got))


def test_no_quasi_identifiers_give_empty_objects():
    assert generalized_json({}, 2) == ["{}", "{}"]
