-- =====================================================================
-- Help and privileges
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
    public_fns text[] := ARRAY['usage', 'k_anonymity', 'equivalence_classes', 'l_diversity',
                               'allow_requests', 'anonymize_request', 'drop_release'];
    admin_fns  text[] := ARRAY['set_role', 'load_hierarchy', 'interval_hierarchy', 'drop_hierarchy'];
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
GRANT EXECUTE ON FUNCTION deid._raise(text, text, text, text) TO PUBLIC;
-- deid.rid_sets (audit view for deid_admin) expands chunks with this pure helper.
GRANT EXECUTE ON FUNCTION deid._rid_set_entries(int[], text[], int[], bigint[]) TO deid_admin;
