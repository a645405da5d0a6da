-- deid 1.0.0 -> 1.1.0, disassociation (003's utility policies): the utility-policy functions
-- deid.utility_policy(hierarchy, level) and deid.utility_from(relation, ...) are new. Their
-- bodies come with the re-created functions of the update; this fragment only grants EXECUTE
-- as sql/90_usage_privileges.sql does on a fresh install (idempotent; skipped if absent).
DO $grants$
DECLARE
    f text;
BEGIN
    FOREACH f IN ARRAY ARRAY[
        'deid._utility_policy(text, integer, name)',
        'deid.utility_policy(text, integer)',
        'deid._utility_from(oid, text, text)',
        'deid.utility_from(regclass, text, text)',
        'deid.utility_from(text, text, text)']
    LOOP
        IF to_regprocedure(f) IS NOT NULL THEN
            EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO PUBLIC', f);
        END IF;
    END LOOP;
END
$grants$;
