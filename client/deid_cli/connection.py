"""The connection, with libpq's own settings: PG* environment variables, a service file
(`--dbname service=name`), or a URL / conninfo string in --dbname, as psql takes them; inside a
checkout with nothing naming a server, its private cluster (checkout.py)."""
import psycopg

from . import checkout


def add_arguments(parser):
    g = parser.add_argument_group("connection (libpq: PGHOST, PGPORT, PGUSER, PGDATABASE, PGSERVICE, ...)")
    g.add_argument("-d", "--dbname", help="database name, URL or conninfo string (postgresql://..., 'service=x')")
    g.add_argument("-h", "--host", help="server host or socket directory")
    g.add_argument("-p", "--port", help="server port")
    g.add_argument("-U", "--username", help="role to connect as")


def connect(args):
    """An autocommit connection; only the options given override libpq's defaults."""
    kw = {k: v for k, v in (("host", args.host), ("port", args.port), ("user", args.username))
          if v is not None}
    dbname = args.dbname or ""
    kw = {**checkout.defaults(args.host, args.port, dbname), **kw}
    if dbname and "=" not in dbname and "://" not in dbname:
        kw["dbname"], dbname = dbname, ""          # a plain database name, as psql's -d takes it
    return psycopg.connect(dbname, autocommit=True, **kw)


def pin_search_path(conn):
    """Names in the client's own statements resolve in pg_catalog (and deid's schema-qualified
    ones), never in a schema another role may create functions or operators in ("$user",
    public): a command that only reads deid's catalog runs no other role's code."""
    conn.execute("SET search_path = pg_catalog, pg_temp")
