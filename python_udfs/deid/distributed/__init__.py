"""Releases over a sharded warehouse: one request, every node at once, through PL/Proxy
(docs/sharding.md).

A source is registered on the coordinator once (catalog.register_source: the source's owner
or a deid_admin) as sharded over a PL/Proxy cluster -- a SQL/MED server of the plproxy
wrapper, p0 .. p(2^n - 1) naming the nodes -- by its key column (the patient or record id).
deid.anonymize_request on such a source takes the same arguments and returns the same row;
dispatch.anonymize_request hands it to coordinator.anonymize_request:

    coordinator.begin      SECURITY DEFINER (deid_owner): validate, authorize the method's
                           distribution (methods/contract.py DISTRIBUTION), name the release,
                           lock a run slot, draw its token (naming the slot) and proof
    protocol.cleanup       the caller's parts of dead runs go (the next request cleans up)
    ping every node        a node down: a clear error before anything is stored anywhere
    deid._dist_store       RUN ON ALL, as the caller (PL/Proxy connects as current_user):
                           node.store runs the single-node request on each node with that
                           node's grants, policies, RLS and code checks, then node.hold keeps
                           the part pending (its views revoked from everyone) under the run
    deid._dist_check       RUN ON ALL: each node digests its stored part again; the
                           coordinator compares with the digests store reported (taken once
                           the verifier passed, in store's transaction)
    coordinator.finish     SECURITY DEFINER: the log row (deid.distributed_release, with the
                           proof) and the coordinator's views; the release exists when the
                           coordinator's transaction commits
    any failure            every reachable node's part of the run is removed (node.abort), and
                           the error is the node's own (SQLSTATE, message, hint) or the
                           coordinator's

The two-phase shape without a distributed transaction (protocol.py): a node's part is visible
only to a reader who shows the run's proof, and only the coordinator's committed log holds the
proof (node.rows checks sha256(proof)); the coordinator's transaction holds the row lock of a slot
(deid.run_slot, named by the run's token) while the run lasts, so protocol.cleanup removes
exactly the parts whose run neither committed nor still runs (a crash of the coordinator or of
a node at any point).

Modules: catalog.py (registration, the cluster's partitions), coordinator.py (the coordinator's
orchestration), protocol.py (run slots, proofs, cleanup, the nodes' errors), node.py (the node
side), eligibility.py (the pre-store check on every node), generalization.py and
generalization_sql.py (the global merge of generalization: class tables, the search, the
parts stored at the chosen levels), read_cache.py (a node's class-step read kept for the store
step of the same run and role), releases.py (reading, re-verifying and dropping a distributed
release). A node runs the single-node request through SQL (deid._anonymize_request), as the
caller; the steps that need the request's snapshot use the pending-snapshot store (pending.py)
and, for a stored part, the pipeline's finish. The pipeline imports nothing from here:
dispatch.py sends a distributed source to the coordinator.
"""
