"""deid on the command line: a client of the deid PostgreSQL extension (psycopg, libpq settings).

Commands are small modules (list_cmd.py, verify_cmd.py), each with `add_parser(sub)` and
`run(args, conn) -> int`; connection.py opens the connection, output.py prints tables or JSON.
"""
__version__ = "1.1.0"
