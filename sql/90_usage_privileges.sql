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

-- Nothing is executable by default; grant what each role needs.
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA deid FROM PUBLIC;
DO $grants$
DECLARE
    f regprocedure;
    -- public wrappers and the SECURITY INVOKER implementations they call (they run as the
    -- caller, so executing them grants nothing), and the definers those call back. The
    -- administration functions check deid_admin membership themselves, so that a non-admin
    -- gets a 42501 with a HINT rather than PostgreSQL's bare "permission denied".
    public_fns text[] := ARRAY['usage', 'k_anonymity', 'equivalence_classes', 'l_diversity',
                               'allow_requests', 'anonymize_request', 'drop_release',
                               'request_begin', 'request_finish', 'raise', 'relation', 'jsonb',
                               'column_roles', 'set_role', 'load_hierarchy', 'interval_hierarchy',
                               'load_standard_hierarchy', 'date_hierarchy', 'age_hierarchy',
                               'drop_hierarchy', 'reconstruct', 'unset_role', 'clear_roles',
                               'utility_policy', 'utility_from', 'revoke_requests',
                               'verify_release', 'report_source', 'register_distributed_source',
                               'cleanup_distributed', 'dist_begin', 'dist_finish', 'dist_proof',
                               'dist_read', 'dist_runs', 'dist_cluster', 'dist_node_ping',
                               'dist_node_store', 'dist_hold', 'dist_node_check',
                               'dist_node_abort', 'dist_node_pending', 'dist_node_rows',
                               'dist_ping_on', 'dist_store', 'dist_check', 'dist_abort_on',
                               'dist_pending', 'dist_fetch', 'generalization_classes',
                               'generalization_levels', 'dist_gen_classes', 'dist_store_part',
                               'dist_gen_stored', 'dist_node_gen_classes',
                               'dist_node_store_part', 'dist_part_finish',
                               'dist_node_gen_stored', 'dist_eligible', 'dist_node_eligible',
                               'dist_eligibility_begin', 'dist_eligibility_check',
                               'drop_release_any', 'verify_release_any', 'dist_release_of',
                               'dist_drop', 'dist_verify', 'dist_node_drop', 'dist_node_verify',
                               'dist_drop_finish', 'drop_release_forced', 'dist_drop_forced',
                               'dist_drop_on'];
    admin_fns  text[] := ARRAY['store_role'];
BEGIN
    FOR f IN
        SELECT p.oid::regprocedure FROM pg_proc p
         WHERE p.pronamespace = 'deid'::regnamespace
           AND (p.proname = ANY (public_fns) OR ltrim(p.proname, '_') = ANY (public_fns))
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO PUBLIC', f);
    END LOOP;
    FOR f IN
        SELECT p.oid::regprocedure FROM pg_proc p
         WHERE p.pronamespace = 'deid'::regnamespace
           AND (p.proname = ANY (admin_fns) OR ltrim(p.proname, '_') = ANY (admin_fns))
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO deid_admin', f);
    END LOOP;
END
$grants$;
-- deid.rid_sets (audit view for deid_admin) expands chunks with this pure helper.
GRANT EXECUTE ON FUNCTION deid._rid_set_entries(bytea, text[], bytea, bytea) TO deid_admin;
GRANT EXECUTE ON FUNCTION deid._copy_in(regclass, text[], text), deid._install_reader(name),
                          deid._grantor_reader(name), deid._reader_name(name),
                          deid._reader_source(), deid._dist_keyed(text) TO deid_owner;

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
