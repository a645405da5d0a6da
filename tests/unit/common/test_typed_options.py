"""Each plug-in reads its options as typed attributes of a class derived from its declared
OPTIONS (and the common ones): request/options.py's option_class. An option is declared once
(name, kind, range, help) and the class follows; a misspelt option is an AttributeError
instead of a silent None, and no plug-in reads an option by a string key."""
import ast
import dataclasses
import typing
from pathlib import Path

import pytest

from deid.methods import registry
from deid.request import options

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("name", sorted(registry.METHODS))
def test_the_options_class_is_derived_from_the_declared_options(name):
    plugin = registry.METHODS[name].plugin
    cls = plugin.Options
    declared = options.COMMON + plugin.OPTIONS
    assert [f.name for f in dataclasses.fields(cls)] == [o.name for o in declared]
    hints = typing.get_type_hints(cls)
    for o in declared:
        assert hints[o.name] == typing.Optional[options.PY_TYPES[o.kind]], o.name
    value = options.typed(cls, {})
    assert all(getattr(value, o.name) is None for o in declared)
    with pytest.raises(dataclasses.FrozenInstanceError):
        value.seed = 1
    with pytest.raises(AttributeError):
        value.sead


def test_a_validated_request_reads_back_its_values():
    opts = options.validate({"seed": 7, "model": "exponential_l", "column_l": {"dx": 2}},
                            options.COMMON + registry.METHODS["anatomy"].plugin.OPTIONS, "anatomy")
    value = options.typed(registry.METHODS["anatomy"].plugin.Options, opts)
    assert (value.seed, value.model, value.column_l, value.output) == (7, "exponential_l",
                                                                       {"dx": 2}, None)


@pytest.mark.parametrize("name", sorted(registry.METHODS))
def test_no_plugin_reads_an_option_by_a_string_key(name):
    path = ROOT / "python_udfs" / "deid" / "methods" / name / "plugin.py"
    bad = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        target = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "get" and node.args \
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            target = node.func.value
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
                and isinstance(node.slice.value, str):
            target = node.value
        elif isinstance(node, ast.Compare) and isinstance(node.left, ast.Constant) \
                and isinstance(node.ops[0], (ast.In, ast.NotIn)):
            target = node.comparators[0]
        if target is not None and ast.unparse(target) in ("opts", "options", "req.options"):
            bad.append(f"{path.name}:{node.lineno} {ast.unparse(node)}")
    assert not bad
