"""deid: in-database de-identification for PostgreSQL (README.md is the user's page).

A request's path; the folders are its steps (pipeline.py sequences them,
docs/dev/architecture.md draws them):
  request   request/: options.py (schemas), selection.py (selection whitelist), access.py and
            code_trust.py (who may read as whom, whose code a read runs), release.py (names)
  read      read/: snapshot.py (columns -> numpy, as the caller or the policy's grantor),
            parallel_pass.py, hashcodes.py, frame.py
  method    methods/registry.py -> methods/<method>/plugin.py (pure: ReleasePlan; its members
            declared in methods/contract.py) -> the paper's kernels beside it (pure numpy)
  plan      plan.py (ReleasePlan: tables and catalog artefacts, plain data)
  write     write/: writer.py (release tables), copy_files.py, copybin.py/copyfields.py
  verify    verify/<method>.py with verify/shared/ (never imports methods/)
  log       log/: overlap.py, composition.py, partition.py (releases read together),
            release_log.py (views, release row, artefacts)
Around it: pg.py (the only plpy user), catalog/ (relations, roles, hierarchies), admin.py,
releases/ (verify_release, reconstruct, utility policies), measure.py, probe.py, usage.py.
"""
__version__ = "1.1.0"
