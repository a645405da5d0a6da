"""Help texts: SELECT deid.usage(); SELECT deid.usage('k_anonymity');"""

TEXTS = {
    "set_role": """deid.set_role(relation regclass, column name, role text,
              hierarchy text DEFAULT NULL, source text DEFAULT NULL) -> text
  Classify a column. role: identifier | quasi_identifier | sensitive | insensitive.
  hierarchy binds a generalization hierarchy (every value of the column must be in it);
  source names the source system the column comes from (k is enforced per source).
  The hierarchy check reads the column as you: refused if that read would run code of a role
  you do not trust (a view's or policy's functions, a cast).
  Needs deid_admin. Read back: SELECT * FROM deid.roles;
  e.g. SELECT deid.set_role('registry.patients', 'age', 'quasi_identifier', hierarchy => 'age_5y');""",
    "unset_role": """deid.unset_role(relation regclass, column name) -> text
  Remove the role of one column: it is unclassified again (a request that names it fails).
  Needs deid_admin. Dropping a table or a column removes its roles by itself.
  e.g. SELECT deid.unset_role('registry.patients', 'zip');""",
    "clear_roles": """deid.clear_roles(relation regclass) -> text
  Remove every column role of a relation (its policies stay). Needs deid_admin.
  e.g. SELECT deid.clear_roles('registry.patients');""",
    "load_hierarchy": """deid.load_hierarchy(name text, rows text, info_loss float8[] DEFAULT NULL) -> text
  Member hierarchy from ARX-style rows, one raw value a line: value;level1;level2;...;*
  info_loss: one phi per level, 0 for level 0 ... 1 for '*' (default: even steps).
  Rejected: a value with two parents, lines that skip a level, '*' below the top.
  Needs deid_admin. Drop with deid.drop_hierarchy(name).""",
    "interval_hierarchy": """deid.interval_hierarchy(name text, low numeric, high numeric, widths int[],
                        info_loss float8[] DEFAULT NULL) -> text
  Bands over [low, high) aligned at low: widths {5,10,20} give [15,20) -> [10,20) -> [0,20) -> *.
  Each width must be a multiple of the one before. Needs deid_admin.""",
    "load_standard_hierarchy": """deid.load_standard_hierarchy(kind text, name text, dots boolean DEFAULT true) -> text
  Load a hierarchy shipped with deid as `name`: kind 'icd10cm' (ICD-10-CM FY2026, 96,477
  codes) or 'icd9cm' (ICD-9-CM version 32, 16,456 codes), code -> category -> block (ICD-9:
  section) -> chapter -> *. Codes are written with their dot ('250.00', 'E11.65'); dots =>
  false for data written without it ('25000'). Checked and stored as deid.load_hierarchy
  does; bind it (deid.set_role) or build a utility policy from it (deid.utility_policy).
  Needs deid_admin. Sources and licences: docs/hierarchies.md.
  e.g. SELECT deid.load_standard_hierarchy('icd9cm', 'icd9', dots => false);""",
    "date_hierarchy": """deid.date_hierarchy(name text, first_day date, last_day date) -> text
  Member hierarchy of every day from first_day to last_day (at most two centuries):
  '2024-02-29' -> '2024-02' -> '2024-Q1' -> '2024' -> *. Needs deid_admin.
  e.g. SELECT deid.date_hierarchy('admission', '2000-01-01', '2025-12-31');""",
    "age_hierarchy": """deid.age_hierarchy(name text, max_age int) -> text
  Interval hierarchy of ages 0 .. max_age (1 to 150) in bands of 1, 5, 10 and 20 years:
  42 -> [42,43) -> [40,45) -> [40,50) -> [40,60) -> *. Needs deid_admin.
  e.g. SELECT deid.age_hierarchy('age_bands', 120);""",
    "drop_hierarchy": """deid.drop_hierarchy(name text) -> text
  Remove a hierarchy that no column role uses. Needs deid_admin.""",
    "allow_requests": """deid.allow_requests(role name, relation regclass, min_k int, min_l int DEFAULT NULL,
                    per_source_k boolean DEFAULT false) -> text
  Let `role` request releases of `relation` without SELECT on it, for k >= min_k (and l >= min_l,
  for a method that has an l: {with_l}; the other methods' requests are judged by their k).
  Only an owner of the relation (its owning role or a member of it) who may read every column
  can do this (being a deid_admin is not enough); requests under the policy read the relation
  as its grantor (the caller), so it may run no code the grantor does not own: a view's
  functions and operators, row-security policies and the casts of the columns read must belong
  to the grantor, to a role that may act as it, or to a superuser (checked now and at every
  request). per_source_k => true lets a generalization release hold k per source system (002);
  by default k holds over all released quasi-identifiers jointly. Rows: deid.policy (written
  only by deid). Remove with deid.revoke_requests(role, relation).
  e.g. SELECT deid.allow_requests('research', 'registry.patients', min_k => 10);""",
    "revoke_requests": """deid.revoke_requests(role name, relation regclass) -> text
  Remove the policy of `role` on `relation`. Its grantor, an owner of the relation or a
  deid_admin may. e.g. SELECT deid.revoke_requests('research', 'registry.patients');""",
    "grant_release": """deid.grant_release(release text, role name) -> text
  Let `role` (or PUBLIC) read a committed release: GRANT SELECT on its views, and `role` joins
  its audience (deid.release_audience). Refused, uniformly, when the role's members would then
  read releases of the same source that single out fewer than k rows together (the
  composition rule). deid_admin only. e.g. SELECT deid.grant_release('dx_2026', 'study_a');""",
    "revoke_release": """deid.revoke_release(release text, role name) -> text
  REVOKE SELECT on a release's views from `role`; the role stays in the release's audience for
  the composition rule (what it read stays read). deid_admin only.""",
    "clear_source_history": """deid.clear_source_history(source text) -> text
  The earlier releases of `source` (schema.table, also after a DROP) no longer bear on later
  ones in the composition rule: for a table re-created with other rows. Logged in
  deid.composition_reset (who, when). deid_admin only.""",
    "k_anonymity": """deid.k_anonymity(relation regclass, quasi_identifiers text[] DEFAULT NULL) -> bigint
  The smallest equivalence-class size over the quasi-identifiers (NULL: the columns whose
  role is quasi_identifier). NULL for an empty relation. Caller needs SELECT on the columns.""",
    "equivalence_classes": """deid.equivalence_classes(relation regclass, quasi_identifiers text[] DEFAULT NULL)
  -> TABLE(class_id bigint, size bigint, qi_values jsonb)
  Every equivalence class with its size, smallest first. Caller needs SELECT.""",
    "l_diversity": """deid.l_diversity(relation regclass, quasi_identifiers text[] DEFAULT NULL,
                 sensitive text[] DEFAULT NULL, exact boolean DEFAULT false)
  -> TABLE(class_id bigint, size bigint, l int, exact_l int)
  L of every class: with one sensitive attribute the number of distinct values; with several
  the sound greedy certificate of 001 Fig. 6 (a lower bound on the number of sensitive values
  that must be deleted to delete every row). exact => true also gives the exact minimum for
  classes of up to 40 rows. NULL sensitive values are a value of their own. Caller needs SELECT.""",
    "anonymize_request": """deid.anonymize_request(source regclass, method text, k int, l int DEFAULT NULL,
                       columns text[] DEFAULT NULL, selection text DEFAULT NULL,
                       options jsonb DEFAULT '{}', release text DEFAULT NULL)
  -> TABLE(release_id bigint, relations text[], rows bigint, groups bigint,
           discernibility float8, verified boolean)
  methods: {methods}.
  columns: the projection (NULL: every column with a role, identifiers excluded).
  selection: a predicate on the source (columns, literals, = <> < > <= >=, IN, BETWEEN,
  IS [NOT] NULL, AND, OR, NOT, parentheses). The release is a snapshot in schema release;
  it is verified independently before it commits, and a failure leaves nothing behind.
  options of every method:
{common}
{per_method}
  Caller needs SELECT on the columns read (then it reads them itself), or a policy from
  deid.allow_requests (then the policy's grantor reads them, the selection may name only the
  released quasi-identifiers, and errors carry no data).""",
    "verify_release": """deid.verify_release(release text) -> jsonb
  Run the release's verifier again on what is stored now (e.g. after pg_restore): the request
  is rebuilt from its log row, the snapshot's row ids from its stored RID sets. Returns the
  verifier's report; a failed check is an error DE002. Needs deid_admin. On the coordinator of
  a sharded warehouse, for a distributed release: every node's verifier on its part, the parts'
  digests against the coordinator's log, and (generalization) k over all parts
  (docs/sharding.md).""",
    "report_source": """deid.report_source(release text) -> jsonb
  The figures of a release's report that come from its source (deid report): its row count and
  the method's utility measures against it (anatomy's ARE, disassociation's MRE and ARE,
  condensation's original moments), beside the release-side measures. Runs as you: the source
  is read only with SELECT, only after deid's walk of the code that read would run (a view's
  functions, row-security policies, casts) finds nothing of a role you do not trust, and only
  over built-in column types; else source.why says why and no source figure is given.
  Needs deid_admin.""",
    "generalization_classes": """deid.generalization_classes(source regclass, k int, columns text[] DEFAULT NULL,
                            selection text DEFAULT NULL, options jsonb DEFAULT '{}') -> bytea
  Generalization over shards, on a node: the class table of the node's rows (002 step 1:
  every distinct combination of the quasi-identifiers' values with its rows), packed, for
  deid.generalization_levels on the coordinator. Same arguments as anonymize_request with
  method 'generalization'. Needs SELECT on the source (docs/sharding.md).""",
    "generalization_levels": """deid.generalization_levels(source regclass, k int, columns text[], selection text,
                           options jsonb, parts bytea[]) -> jsonb
  Generalization over shards, on the coordinator: the nodes' class tables merged and searched
  (002 step 3, greedy or optimal as options.search says); returns {"levels": {column: level},
  "metrics": {...}, "rows", "groups", "discernibility"}: the release every node then stores at
  these levels. Needs SELECT on the source (docs/sharding.md).""",
    "drop_release": """deid.drop_release(release text) -> text
deid.drop_release(release text, force boolean) -> text
  Drop a release's relations; its log row is kept with status 'dropped'. Needs deid_admin
  or the role that requested it (the same holds for options => '{"replace": true}'). On the
  coordinator of a sharded warehouse, for a distributed release: every node's part (every node
  must be up), then the coordinator's views and log row (docs/sharding.md). force => true
  (deid_admin only): a node lost for good; the parts of the other nodes are dropped and the
  lost ones logged in deid.distributed_forced_drop.""",
    "reconstruct": """deid.reconstruct(release text, target text, seed int DEFAULT 0,
                 colocate double precision DEFAULT 0) -> bigint
  Draw one data set of a disassociated release (003 Fig. 5) from its stored chunks into
  release.<target> (record_id, codes text[]); returns its number of records. The same seed
  draws the same data set. colocate in [0, 1]: 0 deals the chunks at random; above 0, the
  pieces of one constraint of the release's utility policy go to one record of their
  cluster with that probability, wherever the release allows. Needs deid_admin or the role
  that requested the release; readable by deid_reader and the caller; dropped with the
  release. On a sharded warehouse's coordinator, every node reconstructs its own part
  (as the caller, who must be allowed on every node) and release.<target> adds each
  record's node (docs/sharding.md).
  e.g. SELECT deid.reconstruct('dx_2026', 'dx_2026_r1', 1);
       SELECT deid.reconstruct('dx_2026_policy', 'dx_2026_c1', 1, colocate => 0.5);
       SELECT count(*) FROM release.dx_2026_r1 WHERE codes @> '{401.9}';""",
    "utility_policy": """deid.utility_policy(hierarchy text, level int) -> jsonb
  003's hierarchy-based utility policy: one constraint per node at `level` (1 .. levels - 2)
  of a member hierarchy, holding the codes below it (ICD-9: 1 = 3-digit category, 2 = section,
  3 = chapter), as the JSON list that options.utility of a disassociation request takes.
  Needs deid_admin (hierarchies are its catalog).
  e.g. SELECT deid.utility_policy(hierarchy => 'icd9', level => 1);""",
    "register_distributed_source": """deid.register_distributed_source(source regclass, cluster text,
                                 key_column text) -> text
  On the coordinator of a sharded warehouse: the source's rows live on the nodes of the PL/Proxy
  cluster `cluster` (a foreign server of the plproxy wrapper), sharded by key_column (the patient
  or record id). deid.anonymize_request on it then runs on every node at once, as you, with each
  node's own grants, policies and RLS; the release is logged when every node stored and verified
  its part, readable here in schema release (each row with the node that holds it, but for a
  global recoding). Run per node: {shard_local} (a set-valued source's records sharded by their
  record column). A global recoding over the nodes' class tables merged here (for a requester
  without SELECT, sealed for the coordinator; its policy is needed here too):
  {global_merge}. An owner of the source or a deid_admin registers it.
  e.g. SELECT deid.register_distributed_source('registry.patients', 'deid_shards', 'patient_id');""",
    "cleanup_distributed": """deid.cleanup_distributed() -> bigint
  Remove the nodes' parts of distributed requests that neither committed nor still run (a node
  or the coordinator crashed mid-request); returns how many parts went. Yours only; a
  deid_admin's call removes every such part. Every distributed request also does this first.""",
    "utility_from": """deid.utility_from(relation regclass, constraint_column text DEFAULT 'constraint_id',
                  code_column text DEFAULT 'code') -> jsonb
  A utility policy kept as (constraint, code) rows, read as you, as that JSON list.
  Overlapping constraints (a code in two) and NULLs are refused.
  e.g. options => jsonb_build_object('m', 2, 'utility',
                                     deid.utility_from('ehr.study_constraints'))::text""",
}


def _with_options(text):
    from .request import options
    from .methods import registry
    per_method = "\n".join(f"  options ({m.name}):\n" + options.usage(m.plugin.OPTIONS)
                            for m in registry.METHODS.values())
    methods = ", ".join(f"{m.name} ({m.paper})" for m in registry.METHODS.values())
    return (text.replace("{common}", options.usage(options.COMMON))
            .replace("{per_method}", per_method).replace("{methods}", methods))


def _methods_where(test):
    from .methods import registry
    return ", ".join(m.name for m in registry.METHODS.values() if test(m.plugin)) or "none"


def _lists_of_methods(text):
    """The method lists of a text, from the registry (what each plug-in declares)."""
    for mark, test in (("{with_l}", lambda p: p.HAS_L),
                       ("{shard_local}", lambda p: p.DISTRIBUTION == "shard_local"),
                       ("{global_merge}", lambda p: p.DISTRIBUTION == "global_merge")):
        if mark in text:
            text = text.replace(mark, _methods_where(test))
    return text


def usage(name=None):
    if name == "anonymize_request":
        return _with_options(TEXTS[name])
    if name is None or name not in TEXTS:
        head = "" if name is None else f"no function named {name!r}; "
        return (head + "deid functions (SELECT deid.usage('<name>') for one):\n  "
                + "\n  ".join(sorted(TEXTS)) +
                "\nCatalog: deid.roles, deid.hierarchies, deid.policy, deid.release.")
    return _lists_of_methods(TEXTS[name])
