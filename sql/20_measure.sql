-- =====================================================================
-- Measurement: k-anonymity, equivalence classes, l-diversity of a relation.
-- The caller must hold SELECT on what is measured.
-- =====================================================================

CREATE FUNCTION deid._k_anonymity(relid oid, quasi_identifiers text[], caller name)
RETURNS bigint LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('measure.k_anonymity', relid, quasi_identifiers, caller)
$$;
CREATE FUNCTION deid.k_anonymity(relation regclass, quasi_identifiers text[] DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE s text; m text; d text; h text;
BEGIN
    RETURN deid._k_anonymity(relation::oid, quasi_identifiers, current_user);
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS s = RETURNED_SQLSTATE, m = MESSAGE_TEXT, d = PG_EXCEPTION_DETAIL, h = PG_EXCEPTION_HINT;
    PERFORM deid._raise(s, m, d, h);
END $$;
COMMENT ON FUNCTION deid.k_anonymity(regclass, text[]) IS
  'Smallest equivalence-class size over the quasi-identifiers (default: columns with role quasi_identifier). See deid.usage(''k_anonymity'').';

CREATE FUNCTION deid._equivalence_classes(relid oid, quasi_identifiers text[], caller name)
RETURNS TABLE (class_id bigint, size bigint, qi_values jsonb)
LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('measure.equivalence_classes', relid, quasi_identifiers, caller)
$$;
CREATE FUNCTION deid.equivalence_classes(relation regclass, quasi_identifiers text[] DEFAULT NULL)
RETURNS TABLE (class_id bigint, size bigint, qi_values jsonb)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE s text; m text; d text; h text;
BEGIN
    RETURN QUERY SELECT * FROM deid._equivalence_classes(relation::oid, quasi_identifiers, current_user);
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS s = RETURNED_SQLSTATE, m = MESSAGE_TEXT, d = PG_EXCEPTION_DETAIL, h = PG_EXCEPTION_HINT;
    PERFORM deid._raise(s, m, d, h);
END $$;
COMMENT ON FUNCTION deid.equivalence_classes(regclass, text[]) IS
  'Each equivalence class over the quasi-identifiers with its size, smallest first. See deid.usage(''equivalence_classes'').';

CREATE FUNCTION deid._l_diversity(relid oid, quasi_identifiers text[], sensitive text[], exact boolean, caller name)
RETURNS TABLE (class_id bigint, size bigint, l int, exact_l int)
LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('measure.l_diversity', relid, quasi_identifiers, sensitive, exact, caller)
$$;
CREATE FUNCTION deid.l_diversity(relation regclass, quasi_identifiers text[] DEFAULT NULL,
                                 sensitive text[] DEFAULT NULL, exact boolean DEFAULT false)
RETURNS TABLE (class_id bigint, size bigint, l int, exact_l int)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE s text; m text; d text; h text;
BEGIN
    RETURN QUERY SELECT * FROM deid._l_diversity(relation::oid, quasi_identifiers, sensitive, coalesce(exact, false), current_user);
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS s = RETURNED_SQLSTATE, m = MESSAGE_TEXT, d = PG_EXCEPTION_DETAIL, h = PG_EXCEPTION_HINT;
    PERFORM deid._raise(s, m, d, h);
END $$;
COMMENT ON FUNCTION deid.l_diversity(regclass, text[], text[], boolean) IS
  'L of every equivalence class: distinct values (one sensitive attribute) or the greedy certificate of 001 Fig. 6 (several); exact => true adds the exact minimum number of deletions on classes of up to 40 rows. See deid.usage(''l_diversity'').';

-- Data-path probe for benchmarks and tests (superuser only; not granted).
CREATE FUNCTION deid._datapath_probe(relid oid, columns text[], rid_column text DEFAULT NULL,
                                     write boolean DEFAULT true)
RETURNS jsonb LANGUAGE plpython3u SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('probe.datapath_probe', relid, columns, rid_column, write)
$$;
