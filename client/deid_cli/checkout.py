"""The private cluster of a deid checkout (`make start`: ./.pgdata, its socket in .pgdata/run,
superuser `postgres`, database `deid`), found when `deid` runs inside the checkout and nothing
names a server: no -h/-p, no PGHOST, PGHOSTADDR, PGPORT or PGSERVICE, and --dbname at most a
plain database name. Whatever names a server wins; outside a checkout nothing changes."""
import os
import pathlib
import re

SERVER_SETTINGS = ("PGHOST", "PGHOSTADDR", "PGPORT", "PGSERVICE")
SOCKET = re.compile(r"^\.s\.PGSQL\.(\d+)$")


def private_socket(start):
    """(socket directory, port) of the nearest ./.pgdata/run at or above `start` that holds a
    server's socket, or None."""
    here = pathlib.Path(start).resolve()
    for folder in (here, *here.parents):
        run = folder / ".pgdata" / "run"
        try:
            ports = sorted(m.group(1) for p in run.iterdir() if (m := SOCKET.match(p.name)))
        except OSError:                 # no such folder, or not ours to read
            continue
        if ports:
            return str(run.resolve()), ports[0]
    return None


def defaults(host, port, dbname, env=None, cwd=None):
    """The libpq keywords that point at the checkout's private cluster, or {} when the caller
    named a server (or is not inside a checkout). `dbname` is the --dbname text as given."""
    env = os.environ if env is None else env
    named = host or port or any(env.get(k) for k in SERVER_SETTINGS)
    if named or (dbname and ("=" in dbname or "://" in dbname)):
        return {}
    found = private_socket(cwd or os.getcwd())
    if found is None:
        return {}
    kw = {"host": found[0], "port": found[1]}
    if not env.get("PGUSER"):
        kw["user"] = "postgres"
    if not dbname and not env.get("PGDATABASE"):
        kw["dbname"] = "deid"
    return kw
