"""The coordinator's side of a distributed release: the same front door, every node at once.

anonymize_request(db, relid, ...)   SECURITY INVOKER, as the caller (dispatch.anonymize_request
                                    hands it a registered source). PL/Proxy connects to every
                                    node as current_user, so each node sees the caller itself.
begin(db, relid, ..., caller)       SECURITY DEFINER: the request's checks that need no rows
                                    (method, k, the method's distribution), its name, its run
finish(db, run, caller)             SECURITY DEFINER: the log row, the views; the result row

The result row is the single-node one: (release_id, relations, rows, groups, discernibility,
verified), with rows and groups summed over the parts (every group or cluster lies within one
node) and the normalized discernibility sum |E|^2 / n over all of them. The views
release.<name>_<suffix> read every node's part (deid._dist_read), each row with a last column
node (the node's database:port: group and cluster ids are per node).

STRATEGIES maps a method's declared distribution (methods/contract.py DISTRIBUTION) to how it
runs; "global_merge" is generalization's: each node's class table merged and searched here,
every part stored at the chosen levels and held, k checked over every node's stored classes
(distributed/generalization_sql.py), and the result row's groups and discernibility those of
the classes over all the nodes. A caller without SELECT on the source takes its sealed path
(sealed_generalization.py: every node's reply sealed for this member's definers).
"""
import dataclasses
import json
import time

from ..errors import (DeidError, DUPLICATE_TABLE, FEATURE_NOT_SUPPORTED, INVALID_PARAMETER_VALUE,
                      INSUFFICIENT_PRIVILEGE, VERIFICATION_FAILED, uniform_refusal)
from ..methods import registry
from ..request import access, release
from ..request.args import RequestArgs
from ..catalog import relations as relations_catalog
from ..sqltext import qualified, quote_ident
from ..log import estimate_view
from .. import locks
from . import catalog, eligibility, protocol, replace

_RUNS = {}          # run token -> the run (this backend's memory, as pending.py's store)

# distribution -> how the coordinator runs it (None: refused with FEATURE_NOT_SUPPORTED)
STRATEGIES = {"shard_local": "shard_local", "global_merge": "global_merge"}

TEST_PAUSE = "deid.distributed_test_pause"     # tests only: wait on an advisory lock after store


def anonymize_request(db, args):
    """SECURITY INVOKER: begin, clean up, ping, store on every node, check, finish, for the
    request's arguments ``args`` (request/args.py). The seconds of each phase go into the
    coordinator's log row (metrics.seconds)."""
    clock = _Phases()
    run = json.loads(db.value("SELECT deid._dist_begin($1, current_user)",
                              [args.to_json()], ["jsonb"]))
    cluster, n = run["cluster"], run["partitions"]
    clock.phase("begin")
    for part in range(n):          # a node down: refused before anything is stored anywhere
        protocol.call(db, "SELECT deid._dist_ping_on($1, $2) AS r", [cluster, part], ["text", "int"])
    clock.phase("ping")
    protocol.cleanup(db, access.current_user(db), {cluster: n})
    clock.phase("cleanup")
    # every node can satisfy the model, or one node's refusal before any node stores a part
    eligibility.precheck(db, run, args)
    clock.phase("precheck")
    parts = []
    try:
        if _sealed(db, run, args):       # the parts stay in the coordinator's definers
            from . import sealed_generalization
            sealed_generalization.run_parts(db, run, args, clock)
        else:
            parts = _store_and_check(db, run, args, clock)
            _RUNS[run["run"]]["parts"] = parts     # only this code path hands finish its parts
        clock.phase("check")
        _RUNS[run["run"]]["seconds"] = clock.times
        old = _RUNS[run["run"]].get("old")
        result = db.query("SELECT * FROM deid._dist_finish($1, current_user)", [run["run"]])
        replace.drop_old_parts(db, old)      # a replaced release's parts, once the new is logged
        return result
    except Exception as e:
        protocol.abort(db, cluster, n, run["run"])
        if protocol.sqlstate(e) == VERIFICATION_FAILED and any(
                p.get("via") == "policy" for p in parts):
            raise uniform_refusal() from None
        raise


def _sealed(db, run, args):
    """A global merge for a caller without SELECT on the source: the sealed path
    (sealed_generalization.py), whose nodes' replies the caller can neither read nor forge."""
    if run["strategy"] != "global_merge":
        return False
    from . import sealed_generalization
    return sealed_generalization.applies(db, args.relid)


def _store_and_check(db, run, args, clock):
    """Every node's part stored, its digests checked (and for a global merge k over every
    part): the parts' reports."""
    parts, chosen = _store(db, run, args, clock)
    clock.phase("store")
    _test_pause(db)
    checks = [json.loads(t) for t in protocol.call(
        db, "SELECT deid._dist_check($1, $2) AS r", [run["cluster"], run["run"]])]
    _compare(parts, checks)
    if run["strategy"] == "global_merge":
        from . import generalization_sql
        parts[0]["global"] = generalization_sql.check_parts(db, run, args.k, parts, chosen)
    return parts


def _store(db, run, args, clock):
    """(every node's part report, the global merge's chosen levels or None): each node stores
    its rows (deid._dist_store, RUN ON ALL, as the caller), or, for a global merge, at the
    levels chosen over every node's classes."""
    if run["strategy"] == "global_merge":
        from . import generalization_sql
        chosen = generalization_sql.choose_on_nodes(db, run, args)
        clock.phase("classes")
        return generalization_sql.store_parts(db, run, args, chosen), chosen
    return [json.loads(t) for t in protocol.call(
        db, "SELECT deid._dist_store($1, $2, $3, $4, $5) AS r",
        [run["cluster"], run["run"], run["release_id"], run["source_name"],
         dataclasses.replace(args, name=run["name"]).to_json()],
        ["text", "text", "bigint", "text", "jsonb"])], None


class _Phases:
    """The seconds of the coordinator's phases, in order (the log row's metrics.seconds)."""

    def __init__(self):
        self.t, self.times = time.perf_counter(), {}

    def phase(self, name):
        now = time.perf_counter()
        self.times[name], self.t = round(now - self.t, 4), now


def _test_pause(db):
    """Tests only (tests/cluster): with deid.distributed_test_pause set, wait here -- every part
    stored, none checked, nothing logged -- on the advisory lock the test holds."""
    key = db.value(f"SELECT pg_catalog.current_setting('{TEST_PAUSE}', true)")
    if key:
        db.execute("SELECT pg_catalog.pg_advisory_xact_lock(hashtext('deid.test'), $1::int)",
                   [int(key)], ["int"])


def _compare(parts, checks):
    """Every part's stored tables digest now as when its node stored and verified it."""
    by_id = {(c["node"], c["release_id"]): c for c in checks}
    if len(checks) != len(parts):
        raise DeidError(VERIFICATION_FAILED, "a node did not report its part for the check",
                        hint="Run the request again.")
    for p in parts:
        c = by_id.get((p["node"], p["release_id"]))
        if c is None or c["digests"] != p["digests"]:
            raise DeidError(VERIFICATION_FAILED,
                            "a node's stored part differs from what it stored and verified",
                            hint="Something changed a part between its store and the "
                                 "coordinator's check; the request was undone on every node. "
                                 "Check the node's deid_release schema, then run it again.")


def _run_of(run, caller):
    r = _RUNS.get(run)
    if r is None or r["caller"] != caller:
        raise DeidError(INSUFFICIENT_PRIVILEGE, "no distributed request of this session waits",
                        hint="Call deid.anonymize_request(...).")
    return r


def sealed_choose(db, token, caller, run, tables):
    """SECURITY DEFINER (deid._dist_gen_choose): sealed_generalization.choose for this
    backend's run."""
    from . import sealed_generalization
    access.caller_role(db, caller)
    return sealed_generalization.choose(db, token, caller, run, tables, _run_of(run, caller))


def sealed_accept(db, run, caller, parts, stored, checks):
    """SECURITY DEFINER (deid._dist_gen_accept): the run's parts, opened and checked by
    sealed_generalization.accept, kept for finish (never returned to the caller)."""
    from . import sealed_generalization
    access.caller_role(db, caller)
    r = _run_of(run, caller)
    r["parts"] = sealed_generalization.accept(db, run, r, parts, stored, checks, _compare)
    return "accepted"


def begin(db, request, caller):
    """SECURITY DEFINER (deid._dist_begin): the run of the request's arguments, the jsonb
    its caller built (request/args.py): validated, authorized, its release named."""
    args = RequestArgs.of_json(request)
    relid, method, k, l, columns = args.relid, args.method, args.k, args.l, args.column_list
    selection, options, name = args.selection, args.options, args.name
    access.caller_role(db, caller)
    src = catalog.source_of(db, relid)
    if src is None:
        raise DeidError(INVALID_PARAMETER_VALUE, "the source is not distributed",
                        hint="SELECT deid.register_distributed_source(source, cluster, key_column);")
    entry, opts = registry.validate_request(method, k, l, options)
    plugin = entry.plugin
    if opts.get("audience"):     # the coordinator's views go to deid_reader (log/audience.py)
        raise DeidError(FEATURE_NOT_SUPPORTED,
                        "options.audience is not supported for a distributed source",
                        hint="Leave the option out: a distributed release is read by deid_reader.")
    if STRATEGIES.get(plugin.DISTRIBUTION) is None:
        raise DeidError(FEATURE_NOT_SUPPORTED,
                        f"method {method} cannot yet run over a distributed source",
                        hint=f"{method} needs counts merged over every node "
                             f"({plugin.DISTRIBUTION}); release the nodes' source on one server, "
                             "or use anatomy, condensation or disassociation.")
    record = opts.get("record")
    if record is not None and record != src["key_column"]:
        raise DeidError(INVALID_PARAMETER_VALUE,
                        f'the source is sharded by "{src["key_column"]}", not by the record column "{record}"',
                        hint="Records must be whole on one node: register the source by its "
                             "record column, or release it on one server.")
    release_id = db.value("SELECT nextval(pg_catalog.pg_get_serial_sequence('deid.release',"
                          " 'release_id'))")
    rel = relations_catalog.relation(db, relid)
    name = release.release_name(rel, name, release_id)
    locks.lock_release_name(db, name)
    old = replace.old_of(db, name, caller, bool(opts.get("replace")))
    if old is None and release.existing_release(db, name):
        raise DeidError(DUPLICATE_TABLE, f'release "{name}" already exists',
                        hint="Choose another release name.")
    if db.value("SELECT count(*) FROM deid.distributed_key") == 0:
        raise protocol.no_key()
    token = protocol.new_token(db)
    n = catalog.partitions(db, src["cluster"])
    _RUNS[token] = {"release_id": release_id, "name": name, "caller": caller,
                    "relid": relid, "source_name": src["source_name"], "cluster": src["cluster"],
                    "method": method, "k": k, "l": l, "columns": columns, "selection": selection,
                    "options": opts, "partitions": n, "old": old,
                    "part_name": replace.part_name(name, release_id) if old else name}
    return json.dumps({"run": token, "release_id": release_id, "name": _RUNS[token]["part_name"],
                       "cluster": src["cluster"], "partitions": n,
                       "source_name": src["source_name"],
                       "strategy": STRATEGIES[plugin.DISTRIBUTION]})


def finish(db, token, caller):
    """The log row and the views: the release exists when this transaction commits. The parts
    are those anonymize_request stored and checked, kept in this backend's memory (no SQL
    caller hands finish parts of its own making)."""
    access.caller_role(db, caller)
    r = _RUNS.pop(token, None)
    if r is None or r["caller"] != caller or "parts" not in r:
        raise DeidError(INSUFFICIENT_PRIVILEGE, "no distributed request of this session waits",
                        hint="Call deid.anonymize_request(...).")
    parts = r["parts"]
    if len(parts) != r["partitions"]:
        raise DeidError(VERIFICATION_FAILED, "not every node stored a part",
                        hint="Run the request again.")
    columns = parts[0]["columns"]
    if any(p["columns"] != columns for p in parts):
        raise DeidError(VERIFICATION_FAILED, "the nodes' parts differ in their tables",
                        hint="Every node must hold the source with the same columns and types.")
    replace.switch(db, r.get("old"))     # the replaced release's views and log row go first
    relations, t0 = [], time.perf_counter()
    for view in sorted(columns):
        schema, _, table = view.partition(".")
        shown = replace.shown(table, r)   # a replacement's parts carry a name of their own
        relations.append(f"{schema}.{shown}")
        _create_view(db, qualified(schema, shown), r["release_id"], table, columns[view],
                     global_merge=bool(parts[0].get("global")))
        db.execute(f"GRANT SELECT ON {qualified(schema, shown)} TO deid_reader, {quote_ident(caller)}")
        db.execute(f"COMMENT ON VIEW {qualified(schema, shown)} IS " + db.quote_literal(
            f"deid distributed release {r['name']} (#{r['release_id']}, {r['method']}, k={r['k']}"
            + (f", l={r['l']}" if r["l"] else "") + f") of {r['source_name']}, "
            f"{len(parts)} parts"))
    _estimate_view(db, r, relations)
    total = {m: sum(p.get(m) or 0 for p in parts) for m in ("rows", "groups")}
    # normalized discernibility, sum |E|^2 / n (methods/metrics.py): each part's weighed by its rows
    total["discernibility"] = (sum((p.get("discernibility") or 0.0) * (p.get("rows") or 0)
                                   for p in parts) / total["rows"]) if total["rows"] else 0.0
    if parts[0].get("global"):       # global recoding: classes span the nodes (generalization)
        total = parts[0]["global"]
    seconds = r.get("seconds")
    if seconds is not None:          # the phases of anonymize_request, then the views
        total = dict(total, seconds=dict(seconds, views=round(time.perf_counter() - t0, 4)))
    params = {"k": r["k"], "l": r["l"], "columns": r["columns"], "selection": r["selection"],
              "options": r["options"]}
    db.execute("INSERT INTO deid.distributed_release (release_id, name, method, source,"
               " source_name, cluster, run, requested_by, parameters, parts, relations,"
               " columns, metrics) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb,"
               " $10::jsonb, $11, $12::jsonb, $13::jsonb)",
               [r["release_id"], r["name"], r["method"], r["relid"], r["source_name"],
                r["cluster"], token, caller, json.dumps(params, default=str),
                json.dumps([{k: p.get(k) for k in ("node", "release_id", "rows", "groups", "digests")}
                            for p in parts]),
                relations, json.dumps(columns), json.dumps(total)],
               ["bigint", "text", "text", "oid", "text", "name", "text", "name", "text",
                "text", "text[]", "text", "text"])
    return [(r["release_id"], relations, total["rows"], total["groups"],
             float(total["discernibility"]), True)]


def _create_view(db, view, release_id, table, coldefs, global_merge):
    """The view of one table over every node's part. Shard-local: each row with its node (ids
    of groups and clusters are per node). A global merge's classes span the nodes, and k holds
    over their union only: a node is a function of the shard key, so a view that told a row's
    node would show a class's share on one node, below k. Its view has no node column and
    orders the rows by their values, so that neither a column nor the order tells a node."""
    coldefs = coldefs + ", node text"
    read = (f"deid._dist_read({int(release_id)}, {db.quote_literal(table)},"
            f" {db.quote_literal(coldefs)}) AS t({coldefs})")
    db.execute(f"CREATE VIEW {view} AS SELECT * FROM {read}")
    if not global_merge:
        return
    names = [quote_ident(n["attname"]) for n in db.query(
        "SELECT attname FROM pg_catalog.pg_attribute WHERE attrelid = $1::regclass AND attnum > 0"
        " AND NOT attisdropped AND attname <> 'node' ORDER BY attnum", [view], ["text"])]
    db.execute(f"DROP VIEW {view}")
    # the text of the row: every type has one, not every type an ordering
    db.execute(f"CREATE VIEW {view} AS SELECT {', '.join(names)} FROM {read}"
               f" ORDER BY ROW({', '.join(names)})::text")


def _estimate_view(db, r, relations):
    """An anatomy release's estimate view (log/estimate_view.py), as on one server over the
    release's views, here joined on the group and its node (group ids are per node); dropped
    with them (CASCADE)."""
    qit = f"{release.VIEW_SCHEMA}.{r['name']}_qit"
    if not registry.method(r["method"]).plugin.ESTIMATE_VIEW or qit not in relations:
        return
    counts = estimate_view.distributed_counts(r["name"], relations, r["columns"])
    estimate_view.create(db, qualified(release.VIEW_SCHEMA, f"{r['name']}_estimate"),
                         qualified(release.VIEW_SCHEMA, f"{r['name']}_qit"), counts,
                         ["deid_reader", r["caller"]], estimate_view.describe(r["name"]),
                         keys=("group_id", "node"))
