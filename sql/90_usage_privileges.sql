-- =====================================================================
-- Help, privileges and ownership
-- =====================================================================
CREATE FUNCTION deid.usage(function_name text DEFAULT NULL)
RETURNS text LANGUAGE plpython3u STABLE SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
from deid.usage import usage
return usage(function_name)
$$;
COMMENT ON FUNCTION deid.usage(text) IS 'Help: SELECT deid.usage(); or deid.usage(''k_anonymity'')';

-- Nothing is executable by default; grant what each role needs. The build writes the grants
-- at #@GRANTS (extension/build_sql.py, one GRANT per role, every function by its signature):
-- every public function of a #@WRAP line and the implementation it calls are executable by
-- PUBLIC (they run as the caller, so executing them grants nothing); the #@GRANT lines below
-- declare the rest. A declared name the script does not create fails the build.
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA deid FROM PUBLIC;
-- Help; the re-raise, relation and JSON helpers of the wrappers; the definers the public
-- functions call back (each checks its caller itself; the administration functions check
-- deid_admin membership, so that a non-admin gets a 42501 with a HINT rather than
-- PostgreSQL's bare "permission denied").
#@GRANT PUBLIC deid.usage deid._raise deid._relation deid._jsonb deid._column_roles
#@GRANT PUBLIC deid._request_begin deid._request_finish deid._drop_release deid._verify_release
-- every release view calls this in its reader's session (sql/00_catalog.sql)
#@GRANT PUBLIC deid._release_readable
-- The distributed path: the coordinator's definers and the nodes' functions PL/Proxy calls
-- as the caller (sql/40_distributed.sql and the files after it).
#@GRANT PUBLIC deid._dist_begin deid._dist_finish deid._dist_proof deid._dist_read deid._dist_runs
#@GRANT PUBLIC deid._dist_cluster deid._dist_hold deid._dist_release_of deid._dist_drop_finish
#@GRANT PUBLIC deid._dist_eligibility_begin deid._dist_eligibility_check deid._dist_part_finish
#@GRANT PUBLIC deid._dist_node_ping deid._dist_node_store deid._dist_node_check deid._dist_node_abort
#@GRANT PUBLIC deid._dist_node_pending deid._dist_node_rows deid._dist_node_eligible
#@GRANT PUBLIC deid._dist_node_gen_classes deid._dist_node_store_part deid._dist_node_gen_stored
#@GRANT PUBLIC deid._dist_node_drop deid._dist_node_verify deid._dist_drop_forced
#@GRANT PUBLIC deid._reconstruct deid._dist_reconstruct_of deid._dist_reconstruct_finish
#@GRANT PUBLIC deid._dist_node_reconstruct
#@GRANT PUBLIC deid._dist_node_gen_sealed_classes deid._dist_seal_classes deid._dist_gen_choose
#@GRANT PUBLIC deid._dist_node_store_part_sealed deid._dist_part_finish_sealed deid._dist_gen_accept
#@GRANT PUBLIC deid._dist_node_gen_stored_sealed
-- deid.rid_sets (audit view for deid_admin) expands chunks with this pure helper; the policy
-- roles' store (checks deid_admin itself).
#@GRANT deid_admin deid._store_role deid._rid_set_entries
-- deid's own code, as deid_owner: the loader's COPY, the policies' readers.
#@GRANT deid_owner deid._copy_in deid._install_reader deid._grantor_reader deid._reader_name
#@GRANT deid_owner deid._reader_source deid._dist_keyed
#@GRANTS
-- The PL/Proxy functions (made at run time where plproxy is installed) grant themselves: made
-- again here, after the REVOKE above (deid._install_proxies, sql/40_distributed.sql).
DO $proxies$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_language WHERE lanname = 'plproxy') THEN
        PERFORM deid._install_proxies();
    END IF;
END
$proxies$;

-- Ownership: deid_owner (NOLOGIN, no superuser) owns the catalog, the release schemas and
-- every SECURITY DEFINER implementation (and the PL/Python body each calls) except two: deid._copy_in belongs to deid_loader
-- (pg_read_server_files), deid._install_reader stays with the installing superuser (only a
-- superuser creates a PL/Python function and gives it to another role).
ALTER SCHEMA release OWNER TO deid_owner;
ALTER SCHEMA deid_release OWNER TO deid_owner;
GRANT USAGE ON SCHEMA deid TO deid_owner;
-- Only the extension's own objects: ALTER EXTENSION UPDATE runs this again, when schema deid
-- also holds the policies' readers (deid._reader_<md5>, SECURITY DEFINER, owned by their
-- grantors; made by deid.allow_requests, not members of the extension).
DO $owner$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT c.oid::regclass AS rel, c.relkind FROM pg_class c
              WHERE c.relnamespace = 'deid'::regnamespace AND c.relkind IN ('r', 'v', 'S')
                AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = c.oid
                                   AND d.classid = 'pg_class'::regclass AND d.deptype = 'i')
                AND EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = c.oid
                               AND d.classid = 'pg_class'::regclass AND d.deptype = 'e')
    LOOP
        EXECUTE format('ALTER %s %s OWNER TO deid_owner',
                       CASE r.relkind WHEN 'v' THEN 'VIEW' WHEN 'S' THEN 'SEQUENCE' ELSE 'TABLE' END,
                       r.rel);
    END LOOP;
    FOR r IN SELECT p.oid::regprocedure AS fn FROM pg_proc p
              WHERE p.pronamespace = 'deid'::regnamespace
                -- <name>__py: the PL/Python body of a definer, called by that definer only
                -- (extension/build_sql.py, split_definer); its owner alone may execute it
                AND (p.prosecdef OR p.proname LIKE '%\_\_py')
                AND p.proname NOT IN ('_copy_in', '_install_reader')
                AND EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = p.oid
                               AND d.classid = 'pg_proc'::regclass AND d.deptype = 'e')
    LOOP
        EXECUTE format('ALTER FUNCTION %s OWNER TO deid_owner', r.fn);
    END LOOP;
END
$owner$;
ALTER FUNCTION deid._copy_in(regclass, text[], text) OWNER TO deid_loader;
