-- =====================================================================
-- deid catalog: roles, schemas, catalog tables, append-only release log
-- =====================================================================

-- deid's roles are cluster-wide; create them once (README, "Security model"):
--   deid_owner   NOLOGIN, no superuser: owns the catalog, the release schemas and the
--                SECURITY DEFINER implementations (method, write, verify, log).
--   deid_loader  NOLOGIN: member of pg_read_server_files and of deid_owner; owns only
--                deid._copy_in, which COPYs deid's own private files into deid's own tables.
--   deid_admin   classifies columns, loads hierarchies, reads the audit trail.
--   deid_reader  reads releases.
DO $roles$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'deid_owner') THEN
        CREATE ROLE deid_owner NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'deid_loader') THEN
        CREATE ROLE deid_loader NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'deid_admin') THEN
        CREATE ROLE deid_admin NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'deid_reader') THEN
        CREATE ROLE deid_reader NOLOGIN;
    END IF;
END
$roles$;
GRANT pg_read_server_files TO deid_loader;
GRANT deid_owner TO deid_loader;

COMMENT ON SCHEMA deid IS 'deid: catalog and SQL API of the de-identification extension';
REVOKE ALL ON SCHEMA deid FROM PUBLIC;
GRANT USAGE ON SCHEMA deid TO PUBLIC;

-- Releases: analysts read only this schema.
CREATE SCHEMA release;
COMMENT ON SCHEMA release IS 'deid releases: the only relations analysts (deid_reader) may read';
REVOKE ALL ON SCHEMA release FROM PUBLIC;
GRANT USAGE ON SCHEMA release TO deid_reader, deid_admin, PUBLIC;

-- The stored tables of releases (views in schema release present them).
CREATE SCHEMA deid_release;
COMMENT ON SCHEMA deid_release IS 'deid: storage of release tables; read them through schema release';
REVOKE ALL ON SCHEMA deid_release FROM PUBLIC;

-- ---------------------------------------------------------------------
-- Column roles per relation
-- ---------------------------------------------------------------------
CREATE TABLE deid.hierarchy (
    name        text PRIMARY KEY CHECK (name ~ '^[A-Za-z_][A-Za-z0-9_]*$'),
    kind        text NOT NULL CHECK (kind IN ('member', 'interval')),
    levels      int  NOT NULL CHECK (levels >= 2),   -- number of levels incl. 0 and '*'
    low         numeric,                              -- interval hierarchies only
    high        numeric,
    widths      numeric[],
    created_by  name NOT NULL DEFAULT current_user,
    created_at  timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE deid.hierarchy IS
  'Generalization hierarchies. Level 0 is the raw value, the top level is ''*'' (suppression).';

-- Dimension hierarchy: the information loss phi of each level (002 Table 7).
CREATE TABLE deid.hierarchy_level (
    hierarchy  text NOT NULL REFERENCES deid.hierarchy ON DELETE CASCADE,
    level      int  NOT NULL CHECK (level >= 0),
    info_loss  float8 NOT NULL CHECK (info_loss >= 0 AND info_loss <= 1),
    PRIMARY KEY (hierarchy, level)
);

-- Member hierarchy: each value at level i and its parent at level i+1 (002 Table 6).
CREATE TABLE deid.hierarchy_member (
    hierarchy  text NOT NULL REFERENCES deid.hierarchy ON DELETE CASCADE,
    level      int  NOT NULL CHECK (level >= 0),
    value      text NOT NULL,
    parent     text,                      -- NULL only at the top level ('*')
    PRIMARY KEY (hierarchy, level, value)
);

CREATE TABLE deid.column_role (
    relation    regclass NOT NULL,
    column_name name     NOT NULL,
    role        text     NOT NULL CHECK (role IN ('identifier', 'quasi_identifier', 'sensitive', 'insensitive')),
    hierarchy   text REFERENCES deid.hierarchy ON UPDATE CASCADE,
    source      text,
    set_by      name NOT NULL DEFAULT current_user,
    set_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (relation, column_name)
);
COMMENT ON TABLE deid.column_role IS
  'Role of each classified column: identifier, quasi_identifier, sensitive or insensitive; source = source system (002 sec. 2).';

-- ---------------------------------------------------------------------
-- Policy: who may request releases of a relation without SELECT on it
-- ---------------------------------------------------------------------
CREATE TABLE deid.policy (
    grantee     regrole  NOT NULL,
    relation    regclass NOT NULL,
    min_k       int NOT NULL CHECK (min_k >= 1),
    min_l       int CHECK (min_l >= 1),
    granted_by  name NOT NULL DEFAULT current_user,   -- the caller of allow_requests (an owner)
    granted_at  timestamptz NOT NULL DEFAULT now(),
    -- generalization: k per source system (002) instead of k over all released
    -- quasi-identifiers jointly (the default for a requester without SELECT)
    per_source_k boolean NOT NULL DEFAULT false,
    PRIMARY KEY (grantee, relation)
);
COMMENT ON TABLE deid.policy IS
  'deid.allow_requests(): a role may request releases of a relation it cannot read, with k >= min_k (and l >= min_l).';

-- ---------------------------------------------------------------------
-- Release log: append-only, one row per committed request
-- ---------------------------------------------------------------------
CREATE TABLE deid.release (
    release_id    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name          text NOT NULL,
    method        text NOT NULL,
    source        regclass,
    source_name   text NOT NULL,          -- survives a later DROP of the source
    parameters    jsonb NOT NULL DEFAULT '{}',
    seed          bigint,
    requested_by  name NOT NULL,
    started_at    timestamptz NOT NULL,
    finished_at   timestamptz,
    status        text NOT NULL CHECK (status IN ('committed', 'replaced', 'dropped')),
    relations     text[] NOT NULL DEFAULT '{}',
    metrics       jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX ON deid.release (name);
CREATE INDEX ON deid.release (source);      -- sql_drop looks a dropped source up
-- One committed release per name; concurrent requests for one name serialize on a row lock of
-- deid.request_lock first, so this index is the backstop, not the message.
CREATE UNIQUE INDEX release_committed_name ON deid.release (name) WHERE status = 'committed';
COMMENT ON TABLE deid.release IS
  'Append-only log of releases. A failed request leaves no row: the whole request is one transaction.';

CREATE FUNCTION deid._release_append_only() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog AS $fn$
BEGIN
    -- Only the status of an existing row may move forward (committed -> replaced/dropped),
    -- and its source may become NULL when the source is dropped (sql/15_ddl.sql: no dead OID
    -- stays behind, where a restore could give it to another relation; source_name stays).
    IF TG_OP = 'UPDATE'
       AND (OLD.release_id, OLD.name, OLD.method, OLD.source_name, OLD.parameters, OLD.seed,
            OLD.requested_by, OLD.started_at, OLD.finished_at, OLD.relations, OLD.metrics)
           IS NOT DISTINCT FROM
           (NEW.release_id, NEW.name, NEW.method, NEW.source_name, NEW.parameters, NEW.seed,
            NEW.requested_by, NEW.started_at, NEW.finished_at, NEW.relations, NEW.metrics)
       AND ((OLD.status = 'committed' AND NEW.status IN ('replaced', 'dropped')
             AND NEW.source IS NOT DISTINCT FROM OLD.source)
            OR (NEW.status = OLD.status AND OLD.source IS NOT NULL AND NEW.source IS NULL)) THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'deid.release is append-only'
        USING ERRCODE = 'insufficient_privilege',
              HINT = 'Releases are never edited or deleted; a new request appends a new row.';
END
$fn$;
CREATE TRIGGER release_append_only BEFORE UPDATE OR DELETE ON deid.release
    FOR EACH ROW EXECUTE FUNCTION deid._release_append_only();

-- ---------------------------------------------------------------------
-- Intermediate results of the methods (audit trail; never for readers)
-- ---------------------------------------------------------------------
-- 001 Theorem 3: the RID sets of a release, per sensitive attribute.  An entry
-- is one value in one group: entry i of a row holds value_list[i] in group i of
-- group_ids, and its RID set is the next (count i of rid_counts) RIDs of rids.
-- The numbers are packed bytea, big-endian and back to back (int4send's bytes
-- per group and count, int8send's per RID): a writer's COPY and the verifier's
-- digest (verify/rid_set_digest.py) take the bytes as they are, with no array
-- element to build or send.  Entries are stored in chunks of consecutive entries
-- (about 64k RIDs each) so that a million-row release is a few dozen catalog
-- rows rather than millions; deid.rid_sets decodes them, one row per entry.
CREATE TABLE deid.rid_set (
    release_id  bigint NOT NULL,           -- deid.release (append-only; no FK to keep writes fast)
    attribute   text   NOT NULL,
    chunk       int    NOT NULL,           -- 0, 1, ... per release and attribute
    group_ids   bytea  NOT NULL,           -- per entry: its group (ascending), int4 big-endian
    value_list  text[] NOT NULL,           -- per entry: its value (NULL is a value)
    rid_counts  bytea  NOT NULL,           -- per entry: the size of its RID set, int4 big-endian
    rids        bytea  NOT NULL,           -- the RID sets, entry after entry, each sorted; int8 big-endian
    PRIMARY KEY (release_id, attribute, chunk),
    CONSTRAINT rid_set_entries_check CHECK (length(group_ids) = 4 * cardinality(value_list)
                                            AND length(rid_counts) = 4 * cardinality(value_list)),
    CONSTRAINT rid_set_rids_check CHECK (length(rids) % 8 = 0)
);
-- Chunks are large, out of line, and never pglz-compressed: pglz takes seconds on
-- sequential RIDs (ids that follow the quasi-identifiers' order; 3M RIDs: pglz 5.1 s to
-- write, lz4 0.14 s at half the size, uncompressed 0.21 s). lz4 where the server has it,
-- else no compression (sql/upgrade/1.1.0/20_rid_set_storage.sql and
-- 60_rid_set_packed.sql do the same).
DO $storage$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_settings WHERE name = 'default_toast_compression'
                                                       AND 'lz4' = ANY (enumvals)) THEN
        ALTER TABLE deid.rid_set
            ALTER group_ids SET STORAGE EXTENDED, ALTER group_ids SET COMPRESSION lz4,
            ALTER value_list SET STORAGE EXTENDED, ALTER value_list SET COMPRESSION lz4,
            ALTER rid_counts SET STORAGE EXTENDED, ALTER rid_counts SET COMPRESSION lz4,
            ALTER rids SET STORAGE EXTENDED, ALTER rids SET COMPRESSION lz4;
    ELSE
        ALTER TABLE deid.rid_set ALTER group_ids SET STORAGE EXTERNAL,
            ALTER value_list SET STORAGE EXTERNAL, ALTER rid_counts SET STORAGE EXTERNAL,
            ALTER rids SET STORAGE EXTERNAL;
    END IF;
END $storage$;

-- One entry of a chunk per row: (group, value, its RIDs), the packed numbers
-- decoded.  (PL/Python: slicing a PL/pgSQL array copies the whole array each
-- time; a Python list slice does not.)  A chunk whose parts disagree (which the
-- table's CHECKs refuse) is an error, never a silently shortened list.
CREATE FUNCTION deid._rid_set_entries(group_ids bytea, value_list text[], rid_counts bytea, all_rids bytea)
RETURNS TABLE (group_id int, value text, rids bigint[])
LANGUAGE plpython3u IMMUTABLE STRICT AS $fn$
import struct


def malformed(detail, hint):
    # a class of builtins is written by its bare name: "deid: ...", not "plpy.Error: ..." (pg.py)
    e = type("deid", (plpy.Error,), {"__module__": "builtins"})("deid.rid_set holds a malformed chunk")
    e.sqlstate, e.detail, e.hint = "XX001", detail, hint
    raise e


n = len(value_list)
if len(group_ids) != 4 * n or len(rid_counts) != 4 * n or len(all_rids) % 8:
    malformed(f"{n} values, {len(group_ids)} bytes of groups, {len(rid_counts)} bytes"
              f" of counts, {len(all_rids)} bytes of RIDs",
              "group_ids and rid_counts hold 4 bytes per value, rids 8 bytes per RID.")
sizes = struct.unpack(f">{n}i", rid_counts)
rids = list(struct.unpack(f">{len(all_rids) // 8}q", all_rids))
if sum(sizes) != len(rids) or min(sizes, default=0) < 0:
    malformed(f"rid_counts add up to {sum(sizes)}, rids holds {len(rids)} RIDs",
              "rid_counts holds the size of each value's RID set, in rids' order.")
stop, out = 0, []
for group, value, size in zip(struct.unpack(f">{n}i", group_ids), value_list, sizes):
    out.append((group, value, rids[stop:stop + size]))
    stop += size
return out
$fn$;

-- The same catalog with one row per release, group, attribute and value (001 Theorem 3 as printed).
CREATE VIEW deid.rid_sets AS
SELECT r.release_id, e.group_id, r.attribute, e.value, e.rids
  FROM deid.rid_set r
 CROSS JOIN LATERAL deid._rid_set_entries(r.group_ids, r.value_list, r.rid_counts, r.rids) e;

-- 002: the equivalence classes of a release with their cardinality and generalized values.
-- A generalization release keeps the classes it was verified on: per source system, the release
-- grouped by that source's quasi-identifiers (002 sec. 2), source = the source's name; the
-- classes over all quasi-identifiers jointly follow from the release itself (GROUP BY all of
-- them). source IS NULL: a class over all the release's quasi-identifiers jointly (anatomy's
-- groups, and every release logged before deid 1.1.0).
CREATE TABLE deid.equivalence_class (
    release_id   bigint NOT NULL,          -- deid.release
    class_id     int    NOT NULL,          -- unique within the release (numbered on over sources)
    cardinality  bigint NOT NULL,
    generalized  jsonb  NOT NULL,          -- {quasi-identifier: value} of the class's attributes
    source       text,                     -- the source system; NULL: all quasi-identifiers jointly
    PRIMARY KEY (release_id, class_id)
);

-- The composition rule (releases of one source read together single out no fewer than k
-- rows; python_udfs/deid/log/composition.py): per release, the ids of the source rows it
-- selected -- the values of its row_id column (disassociation: the record column), sorted,
-- distinct, in the smallest of three layouts its first byte names (python_udfs/deid/log/rowids.py):
-- 'B', the smallest id (int8 big-endian) then a bitmap of the span (a million dense ids: 125 kB),
-- 'R', runs of consecutive ids as (first id, length) int8 pairs (all rows but a band: 33 bytes),
-- or 'I', the ids as int8 big-endian back to back (sparse ids). A new release is
-- checked against every earlier one of the same source (deid.release_identity: a view's base
-- table, a re-created table's name) whose audience meets its own -- committed,
-- replaced or dropped: each was readable -- since the last deid.composition_reset. A set
-- operation on what is stored, never a re-read of the source. The update to 1.1.0 rebuilds
-- the rows of earlier releases from their RID sets and membership, except generalization
-- releases' (sql/upgrade/1.1.0/72_release_selection.sql).
CREATE TABLE deid.release_selection (
    release_id  bigint PRIMARY KEY,        -- deid.release (append-only; no FK, as deid.rid_set)
    row_id      name   NOT NULL,           -- the source column whose values rids holds
    n           bigint NOT NULL CHECK (n >= 0),
    rids        bytea  NOT NULL,           -- n ids, ascending, distinct: 'B', 'R' or 'I'
    CONSTRAINT release_selection_layout_check CHECK (
        (get_byte(rids, 0) = 73 AND length(rids) = 8 * n + 1)
        OR (get_byte(rids, 0) = 66 AND length(rids) >= 9 + (n + 7) / 8)
        OR (get_byte(rids, 0) = 82 AND length(rids) % 16 = 1 AND length(rids) <= 16 * n + 1))
);
COMMENT ON TABLE deid.release_selection IS
  'The source rows each release selected (packed sorted row ids), for the overlap control; deid_admin reads it';
-- Large, out of line, never pglz (as deid.rid_set): lz4 where the server has it.
DO $storage$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_settings WHERE name = 'default_toast_compression'
                                                       AND 'lz4' = ANY (enumvals)) THEN
        ALTER TABLE deid.release_selection ALTER rids SET STORAGE EXTENDED,
            ALTER rids SET COMPRESSION lz4;
    ELSE
        ALTER TABLE deid.release_selection ALTER rids SET STORAGE EXTERNAL;
    END IF;
END $storage$;

-- The composition rule's history resets: releases up to after_release (of the source, or of
-- every source when source and relation are NULL) no longer bear on later requests
-- (log/composition.py). Written by a superuser, or by a deid_admin through
-- deid.clear_source_history (relation: the source's name, which outlives a DROP); logged here
-- with who and when; deid_admin reads it.
CREATE TABLE deid.composition_reset (
    source         oid,                    -- NULL (and relation NULL): every source
    after_release  bigint NOT NULL,        -- releases with release_id <= this are forgotten
    reset_by       name NOT NULL DEFAULT session_user,
    reset_at       timestamptz NOT NULL DEFAULT now(),
    relation       text                    -- the source identity, format('%I.%I')
);
COMMENT ON TABLE deid.composition_reset IS
  'Resets of the composition rule''s history (releases up to after_release no longer bear on later ones); written by a superuser or deid.clear_source_history';

-- The composition rule's cells kept between releases (python_udfs/deid/log/cellstore.py): per
-- source identity and kind (the selections, or one method's groupings), the partition the
-- releases listed in covers induce on the rows -- their ids, a cell per id and each cell's
-- largest k (python_udfs/deid/log/cellstate.py) -- written in the transaction of the release
-- that folded itself in. A cache: read only when covers is exactly the releases the rule must
-- read (else rebuilt from them), so it is not dumped; deid_admin reads it.
CREATE TABLE deid.composition_state (
    identity  text     NOT NULL,           -- the source identity (names and live oids, json)
    kind      text     NOT NULL,           -- 'selections', or 'groups:' and a method
    covers    bigint[] NOT NULL,           -- the release ids folded in, ascending
    body      bytea    NOT NULL,           -- ids, cells and k (cellstate.encode)
    PRIMARY KEY (identity, kind)
);
ALTER TABLE deid.composition_state ALTER body SET STORAGE EXTERNAL;
COMMENT ON TABLE deid.composition_state IS
  'The composition rule''s cells per source, kept between releases (a cache of what the releases listed in covers induce); deid_admin reads it';

-- Which source each release counts as a release of (python_udfs/deid/log/source_identity.py):
-- the base table its row ids come from (a view's, followed through its rule), by name, so a
-- re-created table keeps the history of its name; row_id is that table's column.
CREATE TABLE deid.release_identity (
    release_id  bigint NOT NULL,           -- deid.release (append-only; no FK)
    relation    text   NOT NULL,           -- format('%I.%I', schema, table)
    row_id      name   NOT NULL,
    PRIMARY KEY (release_id, relation)
);
CREATE INDEX ON deid.release_identity (relation);
COMMENT ON TABLE deid.release_identity IS
  'The base table (by name) and row-id column each release counts as a release of, for the composition rule; deid_admin reads it';

-- Who reads each release besides its requester (python_udfs/deid/log/audience.py): deid_reader
-- or options.audience at the request, and the roles of deid.grant_release. Only deid's
-- functions write it; a revoke keeps the row (revoked_by, revoked_at): what was read stays read.
CREATE TABLE deid.release_audience (
    release_id  bigint NOT NULL,           -- deid.release (append-only; no FK)
    audience    name   NOT NULL,           -- a role, or public
    granted_by  name   NOT NULL,
    granted_at  timestamptz NOT NULL DEFAULT now(),
    revoked_by  name,
    revoked_at  timestamptz,
    PRIMARY KEY (release_id, audience)
);
COMMENT ON TABLE deid.release_audience IS
  'The roles each release was granted to (revoked ones stay, marked); written only by deid''s functions; deid_admin reads it';

-- Releases of one source that the composition rule did not compare, their audiences sharing
-- no role when the later one was made (python_udfs/deid/log/audience.py record_apart). A role
-- membership granted since, outside deid, may join them: the later release's views then read
-- only in a session none of whose roles reads the earlier one (deid._release_readable). A
-- deid_admin's deid.grant_release re-checks a release and removes the pairs it checked.
CREATE TABLE deid.release_apart (
    release_id  bigint NOT NULL,           -- the later release (deid.release; no FK)
    apart_from  bigint NOT NULL,           -- an earlier release of the same source
    PRIMARY KEY (release_id, apart_from)
);
COMMENT ON TABLE deid.release_apart IS
  'Pairs of releases of one source never compared by the composition rule; written only by deid''s functions; deid_admin reads it';

-- Evaluated once per query of a release's view (an InitPlan), in the reader's session: true,
-- or 42501 when some role of the session also reads a release this one was kept apart from
-- (its requester or any role ever in its audience, as the rule counts them). Superusers read
-- everything. It names no release (called directly with any id, it tells no name) and no
-- count.
CREATE FUNCTION deid._release_readable(release bigint)
RETURNS boolean LANGUAGE plpgsql STABLE PARALLEL RESTRICTED SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = session_user) THEN
        RETURN true;
    END IF;
    IF EXISTS (
        SELECT 1
          FROM deid.release_apart a
          JOIN deid.release e ON e.release_id = a.apart_from
          CROSS JOIN LATERAL (
              SELECT e.requested_by AS role
              UNION ALL
              SELECT u.audience FROM deid.release_audience u WHERE u.release_id = e.release_id
              UNION ALL
              SELECT 'deid_reader'::name WHERE NOT EXISTS (
                  SELECT 1 FROM deid.release_audience u WHERE u.release_id = e.release_id)
          ) w
          LEFT JOIN pg_catalog.pg_roles g ON g.rolname = w.role
         WHERE a.release_id = release
           AND (w.role = 'public' OR pg_catalog.pg_has_role(session_user, g.oid, 'MEMBER')))
    THEN
        RAISE EXCEPTION 'this release is not readable in this session'
              USING ERRCODE = 'insufficient_privilege',
                    HINT = 'A role of this session also reads another release of the same '
                           'source that this one was never checked against (a role membership '
                           'granted after both were made). A deid_admin re-checks it with '
                           'deid.grant_release(release, role), or revokes the membership.';
    END IF;
    RETURN true;
END $$;

-- ---------------------------------------------------------------------
-- Request locks (python_udfs/deid/locks.py)
-- ---------------------------------------------------------------------
-- One row per thing concurrent requests serialize on: a source (the overlap control compares
-- a release's selection with every earlier one of its source) or a release name. A request
-- updates its row, and so holds the row's lock until its transaction ends. No privilege on
-- this table is granted to any role: only deid's definers (deid_owner) lock its rows, where an
-- advisory lock's key is free for any login to take.
CREATE TABLE deid.request_lock (
    kind   text NOT NULL CHECK (kind IN ('source', 'release_name')),
    key    text NOT NULL,
    taken  bigint NOT NULL DEFAULT 1,
    PRIMARY KEY (kind, key)
);
COMMENT ON TABLE deid.request_lock IS
  'Rows whose locks serialize concurrent requests of one source or one release name; no role but deid_owner touches them';

-- ---------------------------------------------------------------------
-- Views and privileges
-- ---------------------------------------------------------------------
CREATE VIEW deid.roles AS
SELECT r.relation, r.column_name, r.role, r.hierarchy, r.source,
       format_type(a.atttypid, a.atttypmod) AS data_type, r.set_by, r.set_at
  FROM deid.column_role r
  LEFT JOIN pg_catalog.pg_attribute a
         ON a.attrelid = r.relation AND a.attname = r.column_name AND NOT a.attisdropped;
COMMENT ON VIEW deid.roles IS 'Column roles, readable by everyone who may read the catalog';

CREATE VIEW deid.hierarchies AS
SELECT h.name, h.kind, h.levels,
       (SELECT array_agg(l.info_loss ORDER BY l.level) FROM deid.hierarchy_level l
         WHERE l.hierarchy = h.name) AS info_loss,
       (SELECT count(*) FROM deid.hierarchy_member m
         WHERE m.hierarchy = h.name AND m.level = 0) AS leaf_values,
       h.low, h.high, h.widths, h.created_by, h.created_at
  FROM deid.hierarchy h;

REVOKE ALL ON ALL TABLES IN SCHEMA deid FROM PUBLIC;
GRANT SELECT ON deid.roles, deid.hierarchies, deid.hierarchy, deid.hierarchy_level,
                deid.hierarchy_member TO deid_admin;
-- Who reads as whom (policy) and what a column is (column_role) change only through deid's
-- functions (SECURITY DEFINER, deid_owner): no other role writes these rows.
REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON deid.column_role, deid.policy FROM deid_admin;
GRANT SELECT ON deid.column_role, deid.policy TO deid_admin;
GRANT SELECT ON deid.release, deid.rid_set, deid.rid_sets, deid.equivalence_class TO deid_admin;
GRANT deid_reader TO deid_admin;
REVOKE ALL ON deid.release_selection FROM PUBLIC;
GRANT SELECT ON deid.release_selection TO deid_admin;
REVOKE ALL ON deid.composition_reset FROM PUBLIC;
GRANT SELECT ON deid.composition_reset TO deid_admin;
-- per-row sensitive value codes: no role but deid_owner reads them, not even deid_admin
REVOKE ALL ON deid.composition_state FROM PUBLIC;
REVOKE ALL ON deid.release_identity, deid.release_audience, deid.release_apart FROM PUBLIC;
GRANT SELECT ON deid.release_identity, deid.release_audience, deid.release_apart TO deid_admin;

-- The catalog is part of pg_dump output of the database.
SELECT pg_catalog.pg_extension_config_dump('deid.hierarchy', '');
SELECT pg_catalog.pg_extension_config_dump('deid.hierarchy_level', '');
SELECT pg_catalog.pg_extension_config_dump('deid.hierarchy_member', '');
SELECT pg_catalog.pg_extension_config_dump('deid.column_role', '');
SELECT pg_catalog.pg_extension_config_dump('deid.policy', '');
SELECT pg_catalog.pg_extension_config_dump('deid.release', '');
SELECT pg_catalog.pg_extension_config_dump('deid.rid_set', '');
SELECT pg_catalog.pg_extension_config_dump('deid.equivalence_class', '');
SELECT pg_catalog.pg_extension_config_dump('deid.release_selection', '');
SELECT pg_catalog.pg_extension_config_dump('deid.composition_reset', '');
SELECT pg_catalog.pg_extension_config_dump('deid.release_identity', '');
SELECT pg_catalog.pg_extension_config_dump('deid.release_audience', '');
SELECT pg_catalog.pg_extension_config_dump('deid.release_apart', '');
-- ... and so is the release-id sequence: a restored database continues after the last id.
SELECT pg_catalog.pg_extension_config_dump(
    pg_catalog.pg_get_serial_sequence('deid.release', 'release_id'), '');
