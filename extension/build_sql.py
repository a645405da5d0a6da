"""Build the extension script deid--X.Y.Z.sql from the SQL sources, and the update scripts.

    python3 build_sql.py --sources ROOT          # the sources in build order, one a line
    python3 build_sql.py PYDIR SOURCE ... > deid--X.Y.Z.sql
    python3 build_sql.py --update A--B --current X.Y.Z PYDIR SOURCE ... > deid--A--B.sql

The sources (``sources``) are sql/*.sql and each method's own fragments,
python_udfs/deid/methods/<m>/sql/*.sql: a method's tables and functions live in its folder and
are collected here in the registry's order, right after deid's core catalog (sql/00_*.sql,
which they build on) and before every other file of sql/ (whose functions may use them).

An update script from A to B is the hand-written catalog fragments sql/upgrade/B/*.sql in
sorted order (README.md there) and, in the last step of the chain (B is the current version),
the re-creation of everything that can be re-created from sql/*.sql (see ``update``): every
function as CREATE OR REPLACE, so that all of them point at python-B, its comments, grants,
ownership and the dumped configuration.

Two expansions:

``#@BOOT`` (a line of a PL/Python body): imports ``entry`` from the build of this version's
private package directory that the backend loaded (the one installed last, for a backend that
loaded none), reloading the package if the backend had loaded another version's (see ``boot``).

``#@WRAP <public signature> RETURNS <type> => <implementation call>`` (a line of its own):
the public function, a PL/pgSQL SECURITY INVOKER wrapper that runs as the caller, calls the
implementation and re-raises any error through ``deid._raise`` (SQLSTATE, message, detail and
hint kept; PL/Python's exception prefix and traceback dropped; a cancel stays a cancel).
A public argument of type ``regclass`` also gets an overload taking ``text``, resolved with
the caller's search_path by ``deid._relation`` so that an unknown relation is a 42P01 with a
HINT instead of PostgreSQL's bare cast error; in that overload a ``jsonb`` argument is taken
as ``text`` too and parsed by ``deid._jsonb`` (malformed JSON: 22023 with a HINT). A call
with string literals resolves to the all-text overload (PostgreSQL prefers the string
category for unknown literals); typed regclass or jsonb values reach the original.

Who may execute what is declared once and written by the build (``grants``): every public
function of a ``#@WRAP`` line and the implementation it calls are executable by PUBLIC, and
``#@GRANT <role> deid.f deid.g ...`` lines declare the rest (every overload of each name);
``#@GRANTS`` is where the build writes one ``GRANT EXECUTE`` per role, each function by its
full signature. A declared name that names no function of the script fails the build.
"""
import ast
import glob
import os
import re
import sys

REGISTRY = os.path.join("python_udfs", "deid", "methods", "registry.py")
CORE_CATALOG = "00_"           # sql/00_*.sql: what every method's fragment builds on


def registered_methods(root):
    """The registered methods' names in registry order, read from the registry's source (the
    first argument of each ``Method("deid.methods.<name>.plugin", ...)``) without importing deid:
    the build runs before, and apart from, the package's dependencies."""
    tree = ast.parse(open(os.path.join(root, REGISTRY), encoding="utf-8").read())
    out = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Method" and node.args
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            out.append((node.lineno, node.args[0].value.split(".")[-2]))
    return [name for _, name in sorted(out)]      # source order (ast.walk is breadth-first)


def sources(root):
    """The SQL sources of the extension script in build order: sql/00_*.sql, then each
    registered method's python_udfs/deid/methods/<m>/sql/*.sql (registry order, sorted within
    a method), then the rest of sql/*.sql, sorted. Paths are ROOT joined with the relative path."""
    shared = sorted(glob.glob(os.path.join(root, "sql", "*.sql")))
    core = [p for p in shared if os.path.basename(p).startswith(CORE_CATALOG)]
    methods = [p for m in registered_methods(root)
               for p in sorted(glob.glob(os.path.join(root, "python_udfs", "deid", "methods", m, "sql", "*.sql")))]
    return core + methods + [p for p in shared if p not in core]


WRAP = re.compile(r"^#@WRAP\s+(?P<name>[\w.]+)\((?P<args>.*)\)\s+RETURNS\s+(?P<ret>.+?)\s+=>\s+(?P<call>.+)$")

# The body of every PL/pgSQL shell the build writes: the call, and any error it raises raised
# again through deid._raise (SQLSTATE, message, detail and hint; no PL/Python traceback).
# The templates below hold it as text: their doubled braces are the function's own fields.
RERAISE = """DECLARE s text; m text; d text; h text;
BEGIN
    {ret_stmt};
EXCEPTION WHEN OTHERS OR query_canceled THEN
    GET STACKED DIAGNOSTICS s = RETURNED_SQLSTATE, m = MESSAGE_TEXT, d = PG_EXCEPTION_DETAIL,
                            h = PG_EXCEPTION_HINT;
    PERFORM deid._raise(s, m, d, h);
END"""

BODY = """CREATE FUNCTION {{name}}({{args}})
RETURNS {{ret}} LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
{reraise} $$;
""".format(reraise=RERAISE)

# No pinned search_path: the text names a relation as the caller would write it.
TEXT_OVERLOAD = """CREATE FUNCTION {name}({args})
RETURNS {ret} LANGUAGE plpgsql AS $$
BEGIN
    {ret_stmt};
END $$;
"""


def split_args(args):
    """Top-level comma split (defaults may hold commas inside quotes or brackets)."""
    out, depth, quote, cur = [], 0, False, ""
    for ch in args:
        if ch == "'":
            quote = not quote
        elif not quote and ch in "([":
            depth += 1
        elif not quote and ch in ")]":
            depth -= 1
        if ch == "," and depth == 0 and not quote:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def ret_stmt(ret, call):
    if ret.upper().startswith(("TABLE", "SETOF")):
        return f"RETURN QUERY SELECT * FROM {call}"
    return f"RETURN {call}"


def wrap(m):
    name, args, ret, call = m["name"], m["args"], m["ret"], m["call"].rstrip(";")
    parts = split_args(args)
    out = [BODY.format(name=name, args=args, ret=ret, ret_stmt=ret_stmt(ret, call))]
    rel = [i for i, a in enumerate(parts) if a.split()[1:2] == ["regclass"]]
    if rel:
        i = rel[0]
        pname = parts[i].split()[0]
        text_parts = list(parts)
        text_parts[i] = text_parts[i].replace("regclass", "text", 1)
        names = [p.split()[0] for p in parts]
        as_json = {j for j, a in enumerate(parts) if a.split()[1:2] == ["jsonb"]}
        for j in as_json:
            text_parts[j] = text_parts[j].replace("jsonb", "text", 1)

        def arg(j, n):
            if j == i:
                return f"{n} => deid._relation({n})"
            return f"{n} => deid._jsonb({n}, '{n}')" if j in as_json else f"{n} => {n}"
        forward = ", ".join(arg(j, n) for j, n in enumerate(names))
        out.append(TEXT_OVERLOAD.format(name=name, args=", ".join(text_parts), ret=ret,
                                        ret_stmt=ret_stmt(ret, f"{name}({forward})")))
        assert pname == names[i]
    return "\n".join(out)


# deid's SQLSTATE for a module of deid that cannot be imported (python_udfs/deid/errors.py)
CODE_CHANGED = "DE003"
CODE_CHANGED_HINT = ("deid's files changed under this session (an install or an upgrade): reconnect."
                     " If it happens in a new session too, install deid again for this server.")


def boot(pydir):
    """The PL/Python preamble: import ``entry`` from the build of this version that the backend
    loaded, or, in a backend that has none, from the one ``PYDIR/current`` points at.

    Each install is a build of its own, ``PYDIR/builds/<id>``, switched to by renaming the link
    ``current`` (extension/install_python.py). A backend reads the link once, holds a shared lock
    on the build's ``.in-use`` for its life (an install removes only builds whose lock it can
    take) and keeps that build: its lazy imports never mix two builds, whatever is installed
    meanwhile. Whether the loaded package is one of this version's builds is one dictionary
    lookup and a string comparison per call. Several versions' packages may be installed side
    by side (``.../deid/python-X.Y.Z``), and a backend may have imported one version's ``deid`` before
    ``ALTER EXTENSION deid UPDATE`` re-created the functions to point at another; then every
    ``deid.*`` module and every module loaded from another deid package directory (its vendored
    sqlglot; a namespace package has no ``__file__``, only a ``__path__``) is dropped, the old
    build's lock released, and the new build put alone first on sys.path. A version directory
    without ``current`` (an older layout) is itself the build."""
    home = pydir.rstrip("/")
    family = home.rsplit("/", 1)[0] + "/python"
    slow = [
        "import fcntl, importlib, os",
        f"_home = {home!r}",
        "for _try in range(5):",
        "    try:",
        "        _build = _home + '/builds/' + os.path.basename(os.readlink(_home + '/current'))",
        "    except OSError:",
        "        _build, _fd = (_home + '/current') if os.path.isdir(_home + '/current') else _home, None",
        "        break",
        "    try:",
        "        _fd = os.open(_build + '/.in-use', os.O_RDONLY)",
        "    except FileNotFoundError:",
        "        _fd = None",
        "        continue",
        "    try:",
        "        fcntl.flock(_fd, fcntl.LOCK_SH)",
        "    except OSError:",
        "        pass",
        "    if os.path.isfile(_build + '/deid/__init__.py'):",
        "        break",
        "    os.close(_fd)",
        "    _fd = None",
        "_old = getattr(sys.modules.get('deid'), '_build_lock', None)",
        "if _old is not None:",
        "    os.close(_old)",
        "_stale = [n for n, m in list(sys.modules.items()) if n == 'deid' or n.startswith('deid.')",
        f"          or any(p.startswith({family!r}) and not p.startswith(_build + '/')",
        "                 for p in [getattr(m, '__file__', None) or '']",
        "                 + list(getattr(m, '__path__', None) or ()))]",
        "for _n in _stale:",
        "    del sys.modules[_n]",
        f"sys.path[:] = [_build] + [p for p in sys.path if not p.startswith({family!r})]",
        "importlib.invalidate_caches()",
        "import deid",
        "deid._build_lock = _fd"]
    return "\n".join([
        "import sys",
        "try:",
        "    _f = getattr(sys.modules.get('deid'), '__file__', None) or ''",
        f"    if not (_f.startswith(({home + '/builds/'!r}, {home + '/current/'!r}))"
        f" or _f == {home + '/deid/__init__.py'!r}):",
        *("        " + line for line in slow),
        "    from deid.pg import entry",
        "except ImportError as _e:",
        "    plpy.error('deid could not load its code: %s' % _e, sqlstate=" + repr(CODE_CHANGED)
        + ", hint=" + repr(CODE_CHANGED_HINT) + ")"])


# A SECURITY DEFINER PL/Python function of deid's: its header, the attributes between LANGUAGE and
# AS, and its body.
PY_DEFINER = re.compile(r"CREATE\s+FUNCTION\s+(?P<name>deid\._\w+)\((?P<args>.*?)\)\s+RETURNS\s+(?P<ret>.*?)"
                        r"\s+LANGUAGE\s+plpython3u\b(?P<attrs>.*?)\bAS\s+(?P<q>\$\w*\$)(?P<body>.*)(?P=q);$",
                        re.S)
# Owned by deid_loader, not deid_owner, and executable by deid's own code only.
NOT_SPLIT = {"deid._copy_in"}

DEFINER_BODY = """CREATE FUNCTION {{name}}({{args}})
RETURNS {{ret}} LANGUAGE plpgsql{{attrs}}AS $wrap$
#variable_conflict use_variable
{reraise} $wrap$""".format(reraise=RERAISE)


def _no_defaults(args):
    return ", ".join(re.split(r"\s+DEFAULT\s+|\s*=\s*", a, maxsplit=1, flags=re.I)[0]
                     for a in split_args(args))


def split_definer(stmt):
    """A SECURITY DEFINER PL/Python function as two: its body, renamed ``<name>__py`` and
    executable by its owner only (the grants go by name, sql/90_usage_privileges.sql), and under
    the original name, signature, attributes, comment and grants a PL/pgSQL definer that calls it
    and raises any error again through ``deid._raise``. A role may call the definers directly
    (the public wrappers run as the caller); PL/Python reports an error escaping Python with its
    exception class in the message and a traceback in CONTEXT, PL/pgSQL as PostgreSQL's own.
    Any other statement is returned as it is."""
    m = PY_DEFINER.match(stmt)
    if not m or not re.search(r"\bSECURITY\s+DEFINER\b", m["attrs"]) or m["name"] in NOT_SPLIT:
        return stmt
    inner = m["name"] + "__py"
    names = [a.split()[0] for a in split_args(m["args"])]
    attrs = re.sub(r"\s*--[^\n]*", "", m["attrs"])
    call = f"{inner}({', '.join(names)})"
    stmt_ret = f"PERFORM {call}; RETURN" if m["ret"].strip().lower() == "void" else ret_stmt(m["ret"], call)
    py = (f"CREATE FUNCTION {inner}({_no_defaults(m['args'])})\nRETURNS {m['ret']} LANGUAGE plpython3u"
          + re.sub(r"\s*\bSECURITY\s+DEFINER\b", "", m["attrs"]) + f"AS {m['q']}{m['body']}{m['q']};")
    wrapper = DEFINER_BODY.format(name=m["name"], args=m["args"], ret=m["ret"], attrs=attrs,
                                  ret_stmt=stmt_ret)
    return py + "\n" + wrapper + ";"


def split_definers(text):
    """``split_definer`` applied to every statement of TEXT, in place (comments kept)."""
    for stmt in statements(text):
        new = split_definer(stmt)
        if new != stmt:
            text = text.replace(stmt[:-1], new[:-1], 1)
    return text


GRANT_LINE = re.compile(r"^#@GRANT\s+(?P<role>\w+)\s+(?P<names>.+)$")
GRANTS_HERE = "#@GRANTS"
GRANTS_MARK = "-- (the declared grants, written by build)"
# a function the script creates: its name and its arguments (names, types, defaults)
CREATED = re.compile(r"^CREATE\s+FUNCTION\s+(?P<name>deid\.\w+)\((?P<args>.*?)\)\s+RETURNS\b",
                     re.S | re.I)


def declared_grants(paths):
    """{role: [function name, ...]}: the #@GRANT lines of PATHS, and PUBLIC for each #@WRAP
    line's public function and the implementation it calls, in the order declared."""
    out = {}
    for path in paths:
        for line in open(path, encoding="utf-8").read().splitlines():
            m, g = WRAP.match(line), GRANT_LINE.match(line)
            if m:
                called = re.match(r"(deid\.\w+)\(", m["call"].strip())
                out.setdefault("PUBLIC", []).extend([m["name"]] + ([called[1]] if called else []))
            elif g:
                out.setdefault(g["role"], []).extend(g["names"].split())
    return out


def signatures(script):
    """{function name: [signature, ...]} of every function SCRIPT creates (overloads in order),
    each signature as GRANT takes it: argument names and types, without defaults."""
    out = {}
    for stmt in statements(script):
        m = CREATED.match(stmt)
        if m:
            out.setdefault(m["name"], []).append(f"{m['name']}({_no_defaults(m['args'])})")
    return out


def grants(declared, script):
    """The GRANT statements of the declared grants (declared_grants), each function by every
    signature SCRIPT gives its name; a declared name the script does not create is an error."""
    sigs, out = signatures(script), []
    for role, names in declared.items():
        missing = sorted({n for n in names if n not in sigs})
        if missing:
            raise ValueError(f"#@GRANT {role}: no function {', '.join(missing)} in the script")
        listed = [sig for n in sorted(set(names)) for sig in sigs[n]]
        out.append(f"GRANT EXECUTE ON FUNCTION\n    " + ",\n    ".join(listed) + f"\n  TO {role};")
    return "\n".join(out)


def build(pydir, paths):
    out = []
    for path in paths:
        out.append(f"-- ---- {path}")
        for line in open(path, encoding="utf-8").read().splitlines():
            if line == "#@BOOT":
                out.append(boot(pydir))
                continue
            if GRANT_LINE.match(line):
                continue
            if line == GRANTS_HERE:           # a comment until the grants are known
                out.append(GRANTS_MARK)
                continue
            m = WRAP.match(line)
            out.append(wrap(m) if m else line.replace("@DEID_PYDIR@", pydir))
    script = split_definers("\n".join(out) + "\n")
    if GRANTS_MARK in script:
        script = script.replace(GRANTS_MARK, grants(declared_grants(paths), script), 1)
    return script


def statements(text):
    """Split SQL text into statements at top-level semicolons (quotes, dollar quotes and
    comments respected); each statement is returned without its leading comments."""
    out, cur, i, n = [], [], 0, len(text)
    while i < n:
        ch = text[i]
        if text.startswith("--", i):
            j = text.find("\n", i)
            j = n if j < 0 else j + 1
            if "".join(cur).strip():
                cur.append(text[i:j])
            i = j
        elif text.startswith("/*", i):
            j = text.index("*/", i) + 2
            if "".join(cur).strip():
                cur.append(text[i:j])
            i = j
        elif ch == "'":
            escape = i > 0 and text[i - 1] in "eE" and not (text[i - 2:i - 1].isalnum())
            j = i + 1
            while True:
                if escape and text[j] == "\\":
                    j += 2
                elif text[j] == "'":
                    if text[j + 1:j + 2] == "'":
                        j += 2
                    else:
                        break
                else:
                    j += 1
            cur.append(text[i:j + 1])
            i = j + 1
        elif ch == "$" and (m := re.match(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$", text[i:])):
            j = text.index(m[0], i + len(m[0])) + len(m[0])
            cur.append(text[i:j])
            i = j
        elif ch == ";":
            if "".join(cur).strip():
                out.append("".join(cur).strip() + ";")
            cur, i = [], i + 1
        else:
            cur.append(ch)
            i += 1
    if "".join(cur).strip():
        raise ValueError(f"unterminated statement: {''.join(cur).strip()[:80]!r}")
    return out


# What an update re-runs from sql/*.sql: statements that re-create or re-assert an object in
# place. Everything else there (tables, columns, indexes, views, triggers, event triggers,
# sequences, schemas, storage options) changes only through sql/upgrade/<version>/*.sql.
RERUN = re.compile(r"^(CREATE\s+(OR\s+REPLACE\s+)?FUNCTION|COMMENT\s+ON|GRANT|REVOKE|DO\b|"
                   r"ALTER\s+FUNCTION|ALTER\s+SCHEMA\s+\S+\s+OWNER\s+TO|"
                   r"SELECT\s+pg_catalog\.pg_extension_config_dump)", re.I)


def rerunnable(full_script):
    """The statements of a full install script that an update re-runs, functions as
    CREATE OR REPLACE (their owner and privileges stay; a function whose arguments or result
    type change needs a DROP FUNCTION in a fragment first)."""
    out = []
    for stmt in statements(full_script):
        if RERUN.match(stmt):
            out.append(re.sub(r"^CREATE\s+FUNCTION", "CREATE OR REPLACE FUNCTION", stmt, flags=re.I))
    return out


def update(step, current, pydir, paths):
    """The script of one update step A--B (see the module docstring)."""
    old, new = step.split("--")
    updir = os.path.join(os.path.dirname(paths[0]), "upgrade", new)
    fragments = sorted(glob.glob(os.path.join(updir, "*.sql")))
    out = [f"-- deid {old} -> {new}: built by extension/build_sql.py from {updir.removeprefix('../')}/*.sql"
           + (" and sql/*.sql" if new == current else "") + "; do not edit",
           '\\echo Use "ALTER EXTENSION deid UPDATE" to load this file. \\quit']
    for path in fragments:
        out.append(f"-- ---- {path}")
        out.append(open(path, encoding="utf-8").read().rstrip("\n"))
    if new == current:
        out.append("-- ---- every function, comment, grant and owner of sql/*.sql, re-created")
        out.extend(rerunnable(build(pydir, paths)))
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    if sys.argv[1] == "--sources":
        sys.stdout.write("".join(p + "\n" for p in sources(sys.argv[2])))
    elif sys.argv[1] == "--update":
        assert sys.argv[3] == "--current"
        sys.stdout.write(update(sys.argv[2], sys.argv[4], sys.argv[5], sys.argv[6:]))
    else:
        sys.stdout.write(build(sys.argv[1], sys.argv[2:]))
