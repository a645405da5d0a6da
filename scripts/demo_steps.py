"""make demo's method steps: every registered method's demo.sql (its folder's,
python_udfs/deid/methods/<method>/demo.sql), in the registry's order, as one psql script
written to build/demo_steps.sql; prints its path (scripts/demo.sql includes it). A method
without a demo.sql has no step. Reads the registry's lines; imports nothing of deid."""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
METHODS = ROOT / "python_udfs" / "deid" / "methods"
REGISTERED = re.compile(r'register\(Method\("deid\.methods\.(\w+)\.plugin"')


def steps():
    """The demo.sql files of the registered methods, in the registry's order."""
    names = REGISTERED.findall((METHODS / "registry.py").read_text())
    return [METHODS / n / "demo.sql" for n in names if (METHODS / n / "demo.sql").is_file()]


def main():
    out = ROOT / "build" / "demo_steps.sql"
    out.parent.mkdir(exist_ok=True)
    out.write_text("".join(f"\\i '{p}'\n" for p in steps()))
    print(out)


if __name__ == "__main__":
    main()
