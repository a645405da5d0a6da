"""The shape of python_udfs/deid that a newcomer feels: its import graph (imports inside
functions included) and its loops, at file and at folder level; functions over 80 lines or
over 8 parameters; method names written as string literals outside their own folder.

    python3 scripts/code_metrics.py            # a summary
    python3 scripts/code_metrics.py --list     # with every loop, function and literal
    python3 scripts/code_metrics.py --dot      # the folder-level import graph (Graphviz)

tests/unit/common/test_import_graph.py holds the graph to its rules with the same code.
"""
import ast
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "python_udfs" / "deid"
LONG_FUNCTION = 80          # lines
MANY_PARAMETERS = 8


def modules(package=PACKAGE):
    """{dotted module name: path} of every .py file of the package."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _target(name, known):
    """The most specific module of `known` that `name` (dotted) lies in, or None."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports(module, path, known):
    """The modules of `known` that `module` imports, at top level or inside a function."""
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"
    package = module if is_package else module.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            # `from pkg import name`: the submodule pkg.name if there is one, else pkg
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                     for a in node.names]
        else:
            continue
        out.update(t for t in (_target(n, known) for n in names) if t and t != module)
    return out


def graph(package=PACKAGE):
    known = modules(package)
    return {m: imports(m, p, known) for m, p in known.items()}


def folder_of(module):
    """A module's folder: the top-level subpackage of deid it lies in; a module at the top
    level (pipeline.py, errors.py) is a node of its own."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and (PACKAGE / parts[1]).is_dir()) \
        else module.rpartition(".")[2] + ".py" if len(parts) == 2 else parts[0]


def folder_graph(files):
    out = {}
    for m, targets in files.items():
        out.setdefault(folder_of(m), set()).update(
            folder_of(t) for t in targets if folder_of(t) != folder_of(m))
    return out


def loops(g):
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(g.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(g):
        if v not in index:
            visit(v)
    return sorted(out)


def functions(package=PACKAGE):
    """(where, lines, parameters) of every function and method."""
    out = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                params = [*a.posonlyargs, *a.args, *a.kwonlyargs]
                params = [p for p in params if p.arg not in ("self", "cls")]
                params += [p for p in (a.vararg, a.kwarg) if p is not None]
                where = f"{path.relative_to(package.parent)}:{node.name}"
                out.append((where, node.end_lineno - node.lineno + 1, len(params)))
    return out


def method_names(package=PACKAGE):
    return sorted(p.name for p in (package / "methods").iterdir()
                  if p.is_dir() and (p / "plugin.py").exists())


def option_choices(plugin):
    """The string values a plug-in's options may take (``Option(..., choices=(...))``): a
    method's own vocabulary, which may spell another method's name (disassociation's model
    "generalization")."""
    out = set()
    for node in ast.walk(ast.parse(plugin.read_text(), str(plugin))):
        if isinstance(node, ast.keyword) and node.arg == "choices" \
                and isinstance(node.value, (ast.Tuple, ast.List)):
            out.update(e.value for e in node.value.elts
                       if isinstance(e, ast.Constant) and isinstance(e.value, str))
    return out


def method_literals(package=PACKAGE, roots=None):
    """(file, line, name) of every string literal equal to a method's name outside
    methods/<that method>/ and verify/<that method>.py -- except, in a method's folder and its
    verifier, the values of that method's own options (docstrings are prose, not counted).
    roots: other folders or files to search too (their paths relative to the repository)."""
    methods = method_names(package)
    own_values = {m: option_choices(package / "methods" / m / "plugin.py") for m in methods}
    files = sorted(package.rglob("*.py"))
    for root in roots or ():
        files += sorted(root.rglob("*.py")) if root.is_dir() else [root]
    out = []
    for path in files:
        inside = package in path.parents
        rel = path.relative_to(package if inside else ROOT)
        owner = (rel.parts[1] if rel.parts[:1] == ("methods",) and len(rel.parts) > 2
                 else rel.stem if rel.parts[:1] == ("verify",) and len(rel.parts) == 2
                 else None) if inside else None
        tree = ast.parse(path.read_text(), str(path))
        docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                      if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                        ast.AsyncFunctionDef))
                      and n.body and isinstance(n.body[0], ast.Expr)
                      and isinstance(n.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in methods \
                    and id(node) not in docstrings:
                own = node.value == owner or node.value in own_values.get(owner, ())
                if not own:
                    out.append((rel.as_posix(), node.lineno, node.value))
    return out


def summary(package=PACKAGE):
    files = graph(package)
    fns = functions(package)
    return {
        "file import loops": len(loops(files)),
        "folder import loops": len(loops(folder_graph(files))),
        f"functions over {LONG_FUNCTION} lines": sum(1 for f in fns if f[1] > LONG_FUNCTION),
        f"functions over {MANY_PARAMETERS} parameters": sum(1 for f in fns
                                                            if f[2] > MANY_PARAMETERS),
        "method-name literals outside their folder": len(method_literals(package)),
    }


def main(argv):
    files = graph()
    if "--dot" in argv:
        print("digraph deid {")
        for a, targets in sorted(folder_graph(files).items()):
            for b in sorted(targets):
                print(f'  "{a}" -> "{b}";')
        print("}")
        return
    for name, value in summary().items():
        print(f"{name}: {value}")
    if "--list" in argv:
        print("\nfile loops:", *loops(files), sep="\n  ")
        print("folder loops:", *loops(folder_graph(files)), sep="\n  ")
        fns = functions()
        print("long functions:", *(f"{w} {n}" for w, n, _ in fns if n > LONG_FUNCTION),
              sep="\n  ")
        print("many parameters:", *(f"{w} {p}" for w, _, p in fns if p > MANY_PARAMETERS),
              sep="\n  ")
        print("method literals:", *(f"{f}:{n} {v}" for f, n, v in method_literals()),
              sep="\n  ")


if __name__ == "__main__":
    main(sys.argv[1:])
