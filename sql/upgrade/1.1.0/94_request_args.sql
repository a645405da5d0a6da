-- 1.1.0: a request's arguments travel as one jsonb (python_udfs/deid/request/args.py):
-- deid._anonymize_request and deid._request_begin take it whole instead of eight values; the
-- re-creation from sql/30_request.sql adds the new ones.
DROP FUNCTION IF EXISTS deid._anonymize_request(oid, text, int, int, text[], text, text, text);
DROP FUNCTION IF EXISTS deid._request_begin(oid, text, int, int, text[], text, text, text, name);
DROP FUNCTION IF EXISTS deid._request_begin__py(oid, text, int, int, text[], text, text, text, name);
