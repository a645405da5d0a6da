-- =====================================================================
-- The front door: one call, one transaction, one verified release.
--   deid.anonymize_request (wrapper, as the caller)
--     -> deid._anonymize_request      SECURITY INVOKER: the caller's part
--          -> deid._request_begin     SECURITY DEFINER (deid_owner): validate, authorize, plan
--             (policy-based: -> deid._reader_<grantor>, the grantor reads the snapshot)
--          -> (with SELECT: the caller reads the snapshot, here, with its own rights)
--          -> deid._request_finish    SECURITY DEFINER (deid_owner): method, write, verify, log
-- The snapshot passes from the reading part to deid_owner's part in this backend's memory,
-- keyed by a random token (pending.py); no SQL caller can hand deid rows of its own making.
-- =====================================================================
-- The request's arguments travel as one jsonb (python_udfs/deid/request/args.py, RequestArgs):
-- the public wrapper builds it, every begin function takes it whole. A forged one gains
-- nothing: begin refuses any other key or type and checks its values as it always did.
CREATE FUNCTION deid._anonymize_request(request jsonb)
RETURNS TABLE (release_id bigint, relations text[], rows bigint, groups bigint,
               discernibility float8, verified boolean)
LANGUAGE plpython3u SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('dispatch.anonymize_request', request)
$$;
CREATE FUNCTION deid._request_begin(request jsonb, caller name)
RETURNS text LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('pending.begin', request, caller)
$$;
CREATE FUNCTION deid._request_finish(token text, caller name)
RETURNS TABLE (release_id bigint, relations text[], rows bigint, groups bigint,
               discernibility float8, verified boolean)
LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('pipeline.finish', token, caller)
$$;
#@WRAP deid.anonymize_request(source regclass, method text, k int, l int DEFAULT NULL, columns text[] DEFAULT NULL, selection text DEFAULT NULL, options jsonb DEFAULT '{}', release text DEFAULT NULL) RETURNS TABLE (release_id bigint, relations text[], rows bigint, groups bigint, discernibility float8, verified boolean) => deid._anonymize_request(jsonb_build_object('relid', source::oid::bigint, 'method', method, 'k', k, 'l', l, 'columns', columns, 'selection', selection, 'options', options::text, 'name', release))
COMMENT ON FUNCTION deid.anonymize_request(regclass, text, int, int, text[], text, jsonb, text) IS
  'Create a verified release of a source by one of the registered methods; deid.usage(''anonymize_request'') lists them and their options.';

CREATE FUNCTION deid._drop_release(release text, caller name)
RETURNS text LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('request.release.drop_release', release, caller)
$$;
#@WRAP deid.drop_release(release text) RETURNS text => deid._drop_release_any(release, current_user)

-- Run a committed release's verifier again on what is stored (after a restore, an upgrade, or
-- for an audit): deid_admin only; reads only deid's catalog and deid_release (releases/reverify.py).
CREATE FUNCTION deid._verify_release(release text, caller name)
RETURNS jsonb LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('releases.reverify.verify_release', release, caller)
$$;
#@WRAP deid.verify_release(release text) RETURNS jsonb => deid._verify_release_any(release, current_user)
COMMENT ON FUNCTION deid.verify_release(text) IS
  'Run the verifier of a committed release again on what is stored. See deid.usage(''verify_release'').';

-- What a release's report derives from its source (deid report): SECURITY INVOKER end to end,
-- for a deid_admin. The source is read as the caller, with SELECT, after the walk of the code
-- that read would run (code_trust), over built-in column types only; else the answer says why
-- and holds no source-derived number (releases/report_source.py).
CREATE FUNCTION deid._report_source(release text)
RETURNS jsonb LANGUAGE plpython3u SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('releases.report_source.report_source', release)
$$;
#@WRAP deid.report_source(release text) RETURNS jsonb => deid._report_source(release)
COMMENT ON FUNCTION deid.report_source(text) IS
  'A release report''s source-derived figures, read as the caller after deid''s code walk. See deid.usage(''report_source'').';
