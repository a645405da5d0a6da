"""deid: in-database de-identification for PostgreSQL.

Layers (see README and ../shared/DESIGN.md):
  errors.py      DeidError, the one exception every layer raises (SQLSTATE + hint)
  catalog.py     catalog tables (roles, hierarchies, policy, releases)     -- uses plpy
  datapath.py    relation columns <-> numpy arrays                          -- uses plpy
  encoding.py    values -> integer codes + dictionaries (pure)
  request.py     request parsing, sqlglot predicate whitelist (pure)
  methods/       the four published algorithms (pure numpy)
  verify.py      independent privacy checks; never imports methods/ (pure)
  metrics.py     discernibility, ARE, information loss (pure)
"""
__version__ = "0.1.0"
