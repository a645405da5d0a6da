-- =====================================================================
-- Releases over a sharded warehouse (docs/sharding.md; python_udfs/deid/distributed/).
-- Every member (coordinator and nodes) installs the same extension. On the coordinator a
-- source is registered once as distributed over a PL/Proxy cluster (a SQL/MED server of the
-- plproxy wrapper); deid.anonymize_request on it then runs the request on every node at once,
-- as the caller (PL/Proxy connects as current_user), and logs the release only when every
-- node has stored and verified its part. A node's part stays pending (its views readable by
-- nobody); the coordinator's views read the parts through PL/Proxy with the run's proof, a
-- keyed hash of the run under the warehouse's secret key (deid.distributed_key, the same on
-- every member, readable by no caller), which the coordinator gives out only for a logged run.
-- =====================================================================

-- Coordinator: the registered sources, and the log of distributed releases.
CREATE TABLE deid.distributed_source (
    source        oid  PRIMARY KEY,        -- the coordinator's relation (the nodes' definition)
    source_name   text NOT NULL,           -- its qualified name: the same on every node
    cluster       name NOT NULL,           -- the PL/Proxy cluster: a foreign server of plproxy
    key_column    name NOT NULL,           -- the shard key (the patient or record id)
    registered_by name NOT NULL,
    registered_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE deid.distributed_source IS
  'Sources registered as distributed over a PL/Proxy cluster (deid.register_distributed_source).';

CREATE TABLE deid.distributed_release (
    release_id    bigint PRIMARY KEY,      -- from deid.release's sequence: one id space
    name          text NOT NULL UNIQUE,
    method        text NOT NULL,
    source        oid,
    source_name   text NOT NULL,
    cluster       name NOT NULL,
    run           text NOT NULL UNIQUE,    -- the run's token: the nodes' parts carry it
    requested_by  name NOT NULL,
    parameters    jsonb NOT NULL,
    parts         jsonb NOT NULL,          -- per node: its release id, rows, digests
    relations     text[] NOT NULL,
    columns       jsonb NOT NULL,          -- per relation: its column definition list
    metrics       jsonb NOT NULL,
    finished_at   timestamptz NOT NULL DEFAULT clock_timestamp()
);
COMMENT ON TABLE deid.distributed_release IS
  'Committed releases over a sharded source: a row exists only once every node stored and verified its part.';

-- Node: the parts this node stored for a coordinator's run.
CREATE TABLE deid.distributed_part (
    run                 text PRIMARY KEY,
    coordinator_release bigint NOT NULL,
    release_id          bigint NOT NULL,   -- this node's deid.release row of the part
    requested_by        name NOT NULL,
    status              text NOT NULL CHECK (status IN ('pending', 'committed')),
    stored_at           timestamptz NOT NULL DEFAULT clock_timestamp()
);
COMMENT ON TABLE deid.distributed_part IS
  'Parts of distributed releases stored on this node; pending until the coordinator''s proof is shown.';

-- Coordinator: while a run lasts, its coordinator's transaction holds the row lock of one slot
-- (the run's token names it); a run whose slot is free neither runs nor will
-- (distributed/protocol.py). No privilege is granted on it: no other role can lock a slot.
CREATE TABLE deid.run_slot (
    slot  int PRIMARY KEY CHECK (slot >= 0)
);
-- 1024 slots (a DO block: re-run by every update, it keeps slots a superuser added)
DO $slots$
BEGIN
    INSERT INTO deid.run_slot SELECT generate_series(0, 1023) ON CONFLICT DO NOTHING;
END $slots$;
REVOKE ALL ON deid.run_slot FROM PUBLIC;
COMMENT ON TABLE deid.run_slot IS
  'Run slots of distributed requests: a running coordinator holds its slot''s row lock; no role but deid_owner touches them';

-- Every member: the warehouse's secret key (one row), set by a superuser on every member
-- (scripts/shard-cluster.sh setup). No role but deid_owner reads it.
CREATE TABLE deid.distributed_key (
    one  boolean PRIMARY KEY DEFAULT true CHECK (one),
    key  text NOT NULL CHECK (length(key) >= 32)
);
REVOKE ALL ON deid.distributed_key FROM PUBLIC;
CREATE FUNCTION deid.set_distributed_key(key text) RETURNS void
LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
    INSERT INTO deid.distributed_key (key) VALUES (key)
    ON CONFLICT (one) DO UPDATE SET key = EXCLUDED.key
$$;
COMMENT ON FUNCTION deid.set_distributed_key(text) IS
  'Superuser only: the secret key shared by the coordinator and the nodes of a sharded warehouse (docs/sharding.md).';
-- The proof of a run: a keyed hash (H(key || H(key || run)), no length extension), computed
-- only inside deid's definers (executable by deid_owner alone).
CREATE FUNCTION deid._dist_keyed(run text) RETURNS text
LANGUAGE sql STABLE STRICT SET search_path = pg_catalog, pg_temp AS $$
    SELECT encode(sha256(convert_to(k.key || encode(sha256(convert_to(k.key || run, 'UTF8')), 'hex'),
                                    'UTF8')), 'hex')
      FROM deid.distributed_key k
$$;

SELECT pg_catalog.pg_extension_config_dump('deid.distributed_source', '');
SELECT pg_catalog.pg_extension_config_dump('deid.distributed_release', '');
SELECT pg_catalog.pg_extension_config_dump('deid.distributed_part', '');
SELECT pg_catalog.pg_extension_config_dump('deid.distributed_key', '');
GRANT SELECT ON deid.distributed_source TO PUBLIC;
REVOKE ALL ON deid.distributed_release FROM PUBLIC;
GRANT SELECT (release_id, name, method, source, source_name, cluster, run, requested_by,
              parameters, parts, relations, columns, metrics, finished_at)
   ON deid.distributed_release TO deid_admin;
GRANT SELECT ON deid.distributed_part TO deid_admin;

-- ---------------------------------------------------------------------
-- Coordinator side
-- ---------------------------------------------------------------------
CREATE FUNCTION deid._register_distributed_source(relid oid, cluster text, key_column text, caller name)
RETURNS text LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('distributed.catalog.register_source', relid, cluster, key_column, caller)
$$;
#@WRAP deid.register_distributed_source(source regclass, cluster text, key_column text) RETURNS text => deid._register_distributed_source(source::oid, cluster, key_column, current_user)
COMMENT ON FUNCTION deid.register_distributed_source(regclass, text, text) IS
  'Register a source as sharded over a PL/Proxy cluster by key_column: anonymize_request then runs on every node. See deid.usage(''register_distributed_source'').';

CREATE FUNCTION deid._dist_begin(request jsonb, caller name)
RETURNS text LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('distributed.coordinator.begin', request, caller)
$$;
CREATE FUNCTION deid._dist_finish(run text, caller name)
RETURNS TABLE (release_id bigint, relations text[], rows bigint, groups bigint,
               discernibility float8, verified boolean)
LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('distributed.coordinator.finish', run, caller)
$$;
-- The run's proof, for a role that may read the committed release (its views' readers).
CREATE FUNCTION deid._dist_proof(release_id bigint, caller name)
RETURNS TABLE (cluster text, run text, proof text)
LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('distributed.protocol.proof', release_id, caller)
$$;
-- What the coordinator's views read: every node's rows of one table of a committed release.
CREATE FUNCTION deid._dist_read(release_id bigint, tbl text, coldefs text)
RETURNS SETOF record LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    p record;
BEGIN
    SELECT * INTO STRICT p FROM deid._dist_proof(release_id, current_user);
    RETURN QUERY EXECUTE format('SELECT * FROM deid._dist_fetch($1, $2, $3, $4) AS t(%s)', coldefs)
        USING p.cluster, p.run, p.proof, tbl;
END
$$;
CREATE FUNCTION deid._cleanup_distributed(caller name)
RETURNS bigint LANGUAGE plpython3u SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('distributed.protocol.cleanup', caller)
$$;
#@WRAP deid.cleanup_distributed() RETURNS bigint => deid._cleanup_distributed(current_user)
COMMENT ON FUNCTION deid.cleanup_distributed() IS
  'Remove the nodes'' parts of distributed requests that neither committed nor still run. See deid.usage(''cleanup_distributed'').';
-- Of the runs named: which are committed (logged) and which still run (their slot is locked).
CREATE FUNCTION deid._dist_runs(runs text[], caller name)
RETURNS TABLE (run text, committed boolean, running boolean)
LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('distributed.protocol.runs', runs, caller)
$$;

-- The PL/Proxy functions (the coordinator's side of every call to the nodes). PL/Proxy's
-- language is created by its own extension, which only some servers have: a superuser
-- installs them with deid._install_proxies() (scripts/shard-cluster.sh does, and so does
-- the end of the install script where plproxy is already there). They are SECURITY INVOKER: PL/Proxy connects
-- to every node as current_user, the caller.
CREATE FUNCTION deid._dist_cluster(cluster_name text) RETURNS text
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$ SELECT cluster_name $$;
CREATE FUNCTION deid._install_proxies() RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    f text;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_language WHERE lanname = 'plproxy') THEN
        RAISE EXCEPTION 'PL/Proxy is not installed in this database'
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'CREATE EXTENSION plproxy; then SELECT deid._install_proxies();';
    END IF;
    FOREACH f IN ARRAY ARRAY[
        $p$deid._dist_ping_on(cluster_name text, part int) RETURNS SETOF text AS $b$
            CLUSTER deid._dist_cluster(cluster_name); RUN ON part;
            SELECT deid._dist_node_ping(); $b$$p$,
        $p$deid._dist_store(cluster_name text, run text, coord_release bigint, source text,
            request jsonb) RETURNS SETOF text AS $b$
            CLUSTER deid._dist_cluster(cluster_name); RUN ON ALL;
            SELECT deid._dist_node_store(run, coord_release, source, request); $b$$p$,
        $p$deid._dist_eligible(cluster_name text, source text, request jsonb) RETURNS SETOF text AS $b$
            CLUSTER deid._dist_cluster(cluster_name); RUN ON ALL;
            SELECT deid._dist_node_eligible(source, request); $b$$p$,
        $p$deid._dist_drop(cluster_name text, run text) RETURNS SETOF text AS $b$
            CLUSTER deid._dist_cluster(cluster_name); RUN ON ALL;
            SELECT deid._dist_node_drop(run, current_user); $b$$p$,
        $p$deid._dist_drop_on(cluster_name text, part int, run text) RETURNS SETOF text AS $b$
            CLUSTER deid._dist_cluster(cluster_name); RUN ON part;
            SELECT pg_catalog.current_database() || ':' || pg_catalog.current_setting('port')
                   || ' ' || deid._dist_node_drop(run, current_user); $b$$p$,
        $p$deid._dist_verify(cluster_name text, run text) RETURNS SETOF text AS $b$
            CLUSTER deid._dist_cluster(cluster_name); RUN ON ALL;
            SELECT deid._dist_node_verify(run, current_user); $b$$p$,
        $p$deid._dist_check(cluster_name text, run text) RETURNS SETOF text AS $b$
            CLUSTER deid._dist_cluster(cluster_name); RUN ON ALL;
            SELECT deid._dist_node_check(run, current_user); $b$$p$,
        $p$deid._dist_abort_on(cluster_name text, part int, run text) RETURNS SETOF text AS $b$
            CLUSTER deid._dist_cluster(cluster_name); RUN ON part;
            SELECT deid._dist_node_abort(run, current_user); $b$$p$,
        $p$deid._dist_pending(cluster_name text) RETURNS SETOF text AS $b$
            CLUSTER deid._dist_cluster(cluster_name); RUN ON ALL;
            SELECT deid._dist_node_pending(current_user); $b$$p$,
        $p$deid._dist_gen_classes(cluster_name text, run text, source text, k int, columns text[],
            selection text, options text) RETURNS SETOF bytea AS $b$
            CLUSTER deid._dist_cluster(cluster_name); RUN ON ALL;
            SELECT deid._dist_node_gen_classes(run, source, k, columns, selection, options); $b$$p$,
        $p$deid._dist_store_part(cluster_name text, run text, coord_release bigint, source text, k int,
            columns text[], selection text, options text, release text, chosen text) RETURNS SETOF text AS $b$
            CLUSTER deid._dist_cluster(cluster_name); RUN ON ALL;
            SELECT deid._dist_node_store_part(run, coord_release, source, k, columns, selection,
                                              options, release, chosen); $b$$p$,
        $p$deid._dist_gen_stored(cluster_name text, run text) RETURNS SETOF text AS $b$
            CLUSTER deid._dist_cluster(cluster_name); RUN ON ALL;
            SELECT deid._dist_node_gen_stored(run, current_user); $b$$p$,
        $p$deid._dist_gen_classes_sealed(cluster_name text, run text, source text, k int,
            columns text[], selection text, options text) RETURNS SETOF bytea AS $b$
            CLUSTER deid._dist_cluster(cluster_name); RUN ON ALL;
            SELECT deid._dist_node_gen_sealed_classes(run, source, k, columns, selection,
                                                      options); $b$$p$,
        $p$deid._dist_store_part_sealed(cluster_name text, run text, coord_release bigint,
            source text, k int, columns text[], selection text, options text, release text,
            chosen text) RETURNS SETOF text AS $b$
            CLUSTER deid._dist_cluster(cluster_name); RUN ON ALL;
            SELECT deid._dist_node_store_part_sealed(run, coord_release, source, k, columns,
                                                     selection, options, release, chosen); $b$$p$,
        $p$deid._dist_gen_stored_sealed(cluster_name text, run text) RETURNS SETOF text AS $b$
            CLUSTER deid._dist_cluster(cluster_name); RUN ON ALL;
            SELECT deid._dist_node_gen_stored_sealed(run, current_user); $b$$p$,
        $p$deid._dist_reconstruct(cluster_name text, run text, proof text, target text, seed int,
            colocate float8, step text) RETURNS SETOF text AS $b$
            CLUSTER deid._dist_cluster(cluster_name); RUN ON ALL;
            SELECT deid._dist_node_reconstruct(run, proof, target, seed, colocate, step,
                                               current_user); $b$$p$,
        $p$deid._dist_reconstruct_on(cluster_name text, part int, run text, proof text, target text)
            RETURNS SETOF text AS $b$
            CLUSTER deid._dist_cluster(cluster_name); RUN ON part;
            SELECT deid._dist_node_reconstruct(run, proof, target, 0, 0, 'undo', current_user); $b$$p$,
        $p$deid._dist_fetch(cluster_name text, run text, proof text, tbl text) RETURNS SETOF record AS $b$
            CLUSTER deid._dist_cluster(cluster_name); RUN ON ALL;
            TARGET deid._dist_node_rows; $b$$p$]
    LOOP
        EXECUTE 'CREATE OR REPLACE FUNCTION ' || f || ' LANGUAGE plproxy';
        EXECUTE 'ALTER FUNCTION ' || split_part(f, ' RETURNS', 1) || ' OWNER TO deid_owner';
        EXECUTE 'GRANT EXECUTE ON FUNCTION ' || split_part(f, ' RETURNS', 1) || ' TO PUBLIC';
        BEGIN      -- a member of the extension (created by its script: already one)
            EXECUTE 'ALTER EXTENSION deid ADD FUNCTION ' || split_part(f, ' RETURNS', 1);
        EXCEPTION WHEN object_not_in_prerequisite_state OR duplicate_object THEN
            NULL;
        END;
    END LOOP;
END
$fn$;
-- (installed at the end of the script where plproxy is there: sql/90_usage_privileges.sql)

-- ---------------------------------------------------------------------
-- Node side (called through PL/Proxy, as the caller)
-- ---------------------------------------------------------------------
CREATE FUNCTION deid._dist_node_ping() RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT 'deid ' || extversion FROM pg_extension WHERE extname = 'deid'
$$;
-- As the caller: the single-node request, with this node's grants, policies and RLS.
CREATE FUNCTION deid._dist_node_store(run text, coord_release bigint, source text, request jsonb)
RETURNS text LANGUAGE plpython3u SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('distributed.node.store', run, coord_release, source, request)
$$;
CREATE FUNCTION deid._dist_hold(release_id bigint, run text, coord_release bigint, caller name)
RETURNS text LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('distributed.node.hold', release_id, run, coord_release, caller)
$$;
CREATE FUNCTION deid._dist_node_check(run text, caller name)
RETURNS text LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('distributed.node.check', run, caller)
$$;
CREATE FUNCTION deid._dist_node_abort(run text, caller name)
RETURNS text LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('distributed.node.abort', run, caller)
$$;
CREATE FUNCTION deid._dist_node_pending(caller name)
RETURNS SETOF text LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('distributed.node.pending', caller)
$$;
-- The rows of one table of a part and the node's name, for the coordinator's views: only
-- with the run's proof (the coordinator logged the release), and only to a role that may read
-- the release here
-- (deid_reader, its requester, deid_admin). session_user is the role PL/Proxy connected as.
CREATE FUNCTION deid._dist_node_rows(cluster_name text, run text, proof text, tbl text)
RETURNS SETOF record LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    part record;
BEGIN
    SELECT p.*, r.relations INTO part
      FROM deid.distributed_part p JOIN deid.release r USING (release_id)
     WHERE p.run = _dist_node_rows.run AND r.status = 'committed';
    IF part IS NULL OR proof IS NULL OR deid._dist_keyed(part.run) IS DISTINCT FROM proof THEN
        RAISE EXCEPTION 'no committed distributed release has this proof'
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Read a distributed release through its views on the coordinator.';
    END IF;
    IF NOT (pg_has_role(session_user, 'deid_reader', 'MEMBER')
            OR pg_has_role(session_user, 'deid_admin', 'MEMBER')
            OR pg_has_role(session_user, part.requested_by, 'MEMBER')) THEN
        RAISE EXCEPTION 'permission denied for release part on this node'
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'A release is readable by deid_reader and by the role that requested it.';
    END IF;
    IF NOT ('release.' || quote_ident(tbl)) = ANY (part.relations)
       AND NOT ('release.' || tbl) = ANY (part.relations)
       -- a reconstruction drawn from the part (deid.reconstruct on the coordinator)
       AND NOT EXISTS (SELECT 1 FROM deid.reconstruction x WHERE x.release_id = part.release_id
                       AND x.relation = 'release.' || tbl) THEN
        RAISE EXCEPTION 'the release has no table %', quote_ident(tbl)
            USING ERRCODE = 'undefined_table', HINT = 'Read the release through its views.';
    END IF;
    IF part.status = 'pending' THEN       -- the proof shows the coordinator logged it
        UPDATE deid.distributed_part SET status = 'committed' WHERE distributed_part.run = part.run;
    END IF;
    -- ids of groups and clusters are per node: the node's name (database:port) goes with each row
    RETURN QUERY EXECUTE format('SELECT t.*, $1 AS node FROM deid_release.%I t', tbl)
        USING current_database() || ':' || current_setting('port');
END
$$;
