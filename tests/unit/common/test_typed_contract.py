"""The plug-in contract is typed: every member of the Plugin and Verifier protocols declares
its parameters' and its result's types (mypy checks them, strict, in `make typecheck`, part of
`make test`), and the server's Python needs nothing of the type checker: no module of deid
imports mypy or another typing-only package, and the contract's types are imported only
under ``TYPE_CHECKING``."""
import ast
import inspect
import re
from pathlib import Path

from deid.methods import contract

ROOT = Path(__file__).resolve().parents[3]
DEID = ROOT / "python_udfs" / "deid"
TYPING_ONLY = ("mypy", "typing_extensions", "mypy_extensions", "types_")


def test_every_protocol_member_declares_its_types():
    for proto in (contract.Plugin, contract.Verifier):
        hints = proto.__annotations__
        for name, member in vars(proto).items():
            if name.startswith("_") or not callable(member):
                continue
            sig = inspect.signature(member)
            untyped = [p for p in list(sig.parameters)[1:]
                       if sig.parameters[p].annotation is inspect.Parameter.empty]
            assert not untyped, f"{proto.__name__}.{name}: {untyped}"
            assert sig.return_annotation is not inspect.Signature.empty, f"{proto.__name__}.{name}"
        assert all(hints.values())
    assert "OPTIONS" in contract.Plugin.__annotations__
    assert "Tuple" in str(contract.Plugin.__annotations__["OPTIONS"])


def test_no_module_of_the_server_imports_the_type_checker():
    for path in DEID.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            assert not [n for n in names if n.split(".")[0].startswith(TYPING_ONLY)], path


def test_make_test_runs_the_type_checker_strict_on_the_contract_pipeline_and_request():
    make = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^test: typecheck\b", make, re.M)
    ini = (ROOT / "mypy.ini").read_text(encoding="utf-8")
    assert re.search(r"^strict = True$", ini, re.M)
    files = [f.strip() for f in re.search(r"^files = (.*)$", ini, re.M)[1].split(",")]
    assert {"python_udfs/deid/methods/contract.py", "python_udfs/deid/pipeline.py",
            "python_udfs/deid/request"} <= set(files)
    assert "mypy==" in (ROOT / "tests" / "requirements.txt").read_text(encoding="utf-8")
