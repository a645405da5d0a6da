-- Re-raise an error caught by a public wrapper without PL/Python's
-- "plpy.Error: " / "spiexceptions.X: " prefix and traceback, keeping its
-- SQLSTATE, detail and hint.
CREATE FUNCTION deid._raise(sqlstate text, message text, detail text, hint text)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    m text := regexp_replace(message, '^(plpy\.Error|plpy\.SPIError|spiexceptions\.[A-Za-z]+): ', '');
BEGIN
    IF coalesce(detail, '') = '' AND coalesce(hint, '') = '' THEN
        RAISE EXCEPTION USING ERRCODE = sqlstate, MESSAGE = m;
    ELSIF coalesce(hint, '') = '' THEN
        RAISE EXCEPTION USING ERRCODE = sqlstate, MESSAGE = m, DETAIL = detail;
    ELSIF coalesce(detail, '') = '' THEN
        RAISE EXCEPTION USING ERRCODE = sqlstate, MESSAGE = m, HINT = hint;
    ELSE
        RAISE EXCEPTION USING ERRCODE = sqlstate, MESSAGE = m, DETAIL = detail, HINT = hint;
    END IF;
END $$;
