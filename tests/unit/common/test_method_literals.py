"""A method is one folder: no code outside it decides by the method's name. A string literal
equal to a method's name may stand only in methods/<that method>/, verify/<that method>.py
(and, there, as the value of one of that method's own options), its docs page and its tests;
everywhere else -- the server's package and the client -- behaviour comes from what the
plug-in declares (methods/contract.py). The search is scripts/code_metrics.py's."""
import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("code_metrics", ROOT / "scripts" / "code_metrics.py")
metrics = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(metrics)

# beside the server's package: the client, which learns a method's report from the server,
# and the fuzzer's generic parts (each method's parts: tests/fuzz/methods/, tests/fuzz/checkers/)
FUZZ = ROOT / "tests" / "fuzz"
OUTSIDE = [ROOT / "client", FUZZ / "generator.py", FUZZ / "checker.py", FUZZ / "check_sets.py",
           FUZZ / "check_refusal.py"]


def test_no_method_name_is_a_literal_outside_its_folder():
    found = metrics.method_literals(roots=OUTSIDE)
    assert found == [], "\n".join(f"{f}:{n} {v!r}" for f, n, v in found)


def test_the_fuzz_checker_s_generic_part_holds_no_method_s_checks():
    """A method's checks of its releases are its part, tests/fuzz/checkers/<method>.py (a
    function of the generic checker named after a method would be a second home)."""
    from deid.methods.registry import METHODS
    generic = sorted(FUZZ.glob("*.py"))
    found = [(p.name, m) for p in generic for m in METHODS if f"def _{m}(" in p.read_text()]
    assert found == []
    parts = sorted(p.stem for p in (FUZZ / "checkers").glob("*.py") if p.stem != "__init__")
    assert parts == sorted(METHODS)


def test_the_search_finds_a_literal_and_spares_a_method_s_own_option_values(tmp_path):
    pkg = tmp_path / "deid"
    for m in ("a_method", "b_method"):
        (pkg / "methods" / m).mkdir(parents=True)
    (pkg / "methods" / "a_method" / "plugin.py").write_text(
        'OPTIONS = (Option("model", "choice", "", choices=("a_method", "b_method")),)\n'
        'x = "b_method"\n')
    (pkg / "methods" / "b_method" / "plugin.py").write_text('NAME = "b_method"\nx = "a_method"\n')
    (pkg / "verify").mkdir()
    (pkg / "verify" / "a_method.py").write_text('"""a_method: docstrings are prose."""\n'
                                                'y = "b_method"\nz = "a_method"\n')
    (pkg / "log.py").write_text('if m == "a_method":\n    pass\n')
    found = [(f, v) for f, _, v in metrics.method_literals(pkg)]
    assert sorted(found) == [("log.py", "a_method"), ("methods/b_method/plugin.py", "a_method")]
