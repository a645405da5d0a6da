"""deid: in-database de-identification for PostgreSQL (README.md is the user's page).

A request's path, one module a step (pipeline.py sequences them):
  request   pipeline.begin: options.py (schemas), request.py (selection whitelist),
            access.py (who may read as whom), release.py (names, owners)
  read      datapath.py (columns -> numpy, as the caller or the policy's grantor), frame.py
  method    registry.py -> plugins/<method>.py (pure: ReleasePlan) -> methods/ (the papers'
            algorithms, pure numpy)
  plan      plan.py (ReleasePlan: tables and catalog artefacts, plain data)
  write     writer.py (release tables), copybin.py/copyfields.py (binary COPY images)
  verify    verify/ (one module per guarantee and per method; never imports methods/)
  log       catalog_log.py (views, release row, RID sets, classes)
Around it: pg.py (the only plpy user), catalog.py (relations, roles, hierarchies),
hierarchies.py (the Hierarchy type), measure.py, admin.py, usage.py, metrics.py, errors.py.
"""
__version__ = "1.1.0"
