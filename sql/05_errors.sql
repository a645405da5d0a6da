-- Re-raise an error caught by a public wrapper without PL/Python's
-- "plpy.Error: " / "spiexceptions.X: " / "deid: " prefix and traceback, keeping its
-- SQLSTATE, detail and hint.
CREATE FUNCTION deid._raise(sqlstate text, message text, detail text, hint text)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    m text := regexp_replace(message, '^((plpy\.Error|plpy\.SPIError|spiexceptions\.[A-Za-z]+|deid): )+', '');
BEGIN
    -- called directly with what is no error (a role may: the wrappers run as their caller)
    IF sqlstate IS NULL OR sqlstate !~ '^[0-9A-Z]{5}$' OR sqlstate ~ '^00' OR m IS NULL THEN
        RAISE EXCEPTION 'deid._raise needs a SQLSTATE of an error and a message'
              USING ERRCODE = 'invalid_parameter_value',
                    HINT = 'It raises again an error that deid caught; call the public deid functions.';
    END IF;
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

-- A relation named as text, resolved with the caller's search_path (no pinned path here:
-- this runs as the caller, inside the public text overloads that build_sql.py generates).
CREATE FUNCTION deid._relation(relation text) RETURNS regclass LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF relation IS NULL OR relation = '' THEN
        RAISE EXCEPTION 'relation must not be NULL or empty' USING ERRCODE = 'null_value_not_allowed',
              HINT = 'Pass a table or view name, e.g. ''registry.patients''.';
    END IF;
    RETURN relation::regclass;
EXCEPTION
    WHEN undefined_table OR invalid_schema_name OR undefined_object THEN
        RAISE EXCEPTION 'relation "%" does not exist', relation USING ERRCODE = 'undefined_table',
              HINT = 'Name an existing table or view, schema-qualified if it is not on your search_path.';
    WHEN invalid_name OR syntax_error OR invalid_text_representation OR feature_not_supported THEN
        RAISE EXCEPTION 'invalid relation name "%"', relation USING ERRCODE = 'invalid_name',
              HINT = 'Write schema.table, with double quotes around names that need them.';
END $$;

-- A JSON argument given as text (the text overloads of build_sql.py).
CREATE FUNCTION deid._jsonb(value text, what text) RETURNS jsonb LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RETURN value::jsonb;
EXCEPTION WHEN invalid_text_representation OR invalid_parameter_value THEN
    RAISE EXCEPTION '% is not valid JSON', what USING ERRCODE = 'invalid_parameter_value',
          HINT = format('%s is a JSON object, e.g. ''{"seed": 7}''.', what);
END $$;
