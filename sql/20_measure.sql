-- =====================================================================
-- Measurement: k-anonymity, equivalence classes, l-diversity of a relation.
-- SECURITY INVOKER end to end: the relation is read as the caller, so privileges, column
-- privileges, row-level security and security_invoker views apply as PostgreSQL defines
-- them, and any function a view or type calls runs with the caller's rights only.
-- =====================================================================

CREATE FUNCTION deid._k_anonymity(relid oid, quasi_identifiers text[])
RETURNS bigint LANGUAGE plpython3u SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('measure.k_anonymity', relid, quasi_identifiers)
$$;
#@WRAP deid.k_anonymity(relation regclass, quasi_identifiers text[] DEFAULT NULL) RETURNS bigint => deid._k_anonymity(relation::oid, quasi_identifiers)
COMMENT ON FUNCTION deid.k_anonymity(regclass, text[]) IS
  'Smallest equivalence-class size over the quasi-identifiers (default: columns with role quasi_identifier). See deid.usage(''k_anonymity'').';

CREATE FUNCTION deid._equivalence_classes(relid oid, quasi_identifiers text[])
RETURNS TABLE (class_id bigint, size bigint, qi_values jsonb)
LANGUAGE plpython3u SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('measure.equivalence_classes', relid, quasi_identifiers)
$$;
#@WRAP deid.equivalence_classes(relation regclass, quasi_identifiers text[] DEFAULT NULL) RETURNS TABLE (class_id bigint, size bigint, qi_values jsonb) => deid._equivalence_classes(relation::oid, quasi_identifiers)
COMMENT ON FUNCTION deid.equivalence_classes(regclass, text[]) IS
  'Each equivalence class over the quasi-identifiers with its size, smallest first. See deid.usage(''equivalence_classes'').';

CREATE FUNCTION deid._l_diversity(relid oid, quasi_identifiers text[], sensitive text[], exact boolean)
RETURNS TABLE (class_id bigint, size bigint, l int, exact_l int)
LANGUAGE plpython3u SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('measure.l_diversity', relid, quasi_identifiers, sensitive, exact)
$$;
#@WRAP deid.l_diversity(relation regclass, quasi_identifiers text[] DEFAULT NULL, sensitive text[] DEFAULT NULL, exact boolean DEFAULT false) RETURNS TABLE (class_id bigint, size bigint, l int, exact_l int) => deid._l_diversity(relation::oid, quasi_identifiers, sensitive, coalesce(exact, false))
COMMENT ON FUNCTION deid.l_diversity(regclass, text[], text[], boolean) IS
  'L of every equivalence class: distinct values (one sensitive attribute) or the greedy certificate of 001 Fig. 6 (several); exact => true adds the exact minimum number of deletions on classes of up to 40 rows. See deid.usage(''l_diversity'').';

-- Data-path probe for benchmarks and tests (superuser only; not granted).
CREATE FUNCTION deid._datapath_probe(relid oid, columns text[], rid_column text DEFAULT NULL,
                                     write boolean DEFAULT true)
RETURNS jsonb LANGUAGE plpython3u SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('probe.datapath_probe', relid, columns, rid_column, write)
$$;
