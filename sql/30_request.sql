-- =====================================================================
-- The front door: one call, one transaction, one verified release.
-- =====================================================================
CREATE FUNCTION deid._anonymize_request(relid oid, method text, k int, l int, columns text[],
                                        selection text, options text, release text, caller name)
RETURNS TABLE (release_id bigint, relations text[], rows bigint, groups bigint,
               discernibility float8, verified boolean)
LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('release.anonymize_request', relid, method, k, l, columns, selection, options,
             release, caller)
$$;
CREATE FUNCTION deid.anonymize_request(source regclass, method text, k int, l int DEFAULT NULL,
                                       columns text[] DEFAULT NULL, selection text DEFAULT NULL,
                                       options jsonb DEFAULT '{}', release text DEFAULT NULL)
RETURNS TABLE (release_id bigint, relations text[], rows bigint, groups bigint,
               discernibility float8, verified boolean)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE s text; m text; d text; h text;
BEGIN
    RETURN QUERY SELECT * FROM deid._anonymize_request(source::oid, method, k, l, columns,
                                                       selection, options::text, release, current_user);
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS s = RETURNED_SQLSTATE, m = MESSAGE_TEXT, d = PG_EXCEPTION_DETAIL, h = PG_EXCEPTION_HINT;
    PERFORM deid._raise(s, m, d, h);
END $$;
COMMENT ON FUNCTION deid.anonymize_request(regclass, text, int, int, text[], text, jsonb, text) IS
  'Create a verified release of a source: method anatomy (001) | generalization (002). See deid.usage(''anonymize_request'').';

CREATE FUNCTION deid._drop_release(release text, caller name)
RETURNS text LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('release.drop_release', release, caller)
$$;
CREATE FUNCTION deid.drop_release(release text)
RETURNS text LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE s text; m text; d text; h text;
BEGIN
    RETURN deid._drop_release(release, current_user);
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS s = RETURNED_SQLSTATE, m = MESSAGE_TEXT, d = PG_EXCEPTION_DETAIL, h = PG_EXCEPTION_HINT;
    PERFORM deid._raise(s, m, d, h);
END $$;
