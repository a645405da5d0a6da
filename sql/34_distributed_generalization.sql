-- =====================================================================
-- Generalization (002, global recoding) over the nodes of a sharded source: the nodes' class
-- tables (deid.generalization_classes on each node), merged and searched on the coordinator
-- (deid.generalization_levels). Both run as the caller, who needs SELECT on the source
-- (python_udfs/deid/distributed/generalization_sql.py, docs/sharding.md).
-- =====================================================================
CREATE FUNCTION deid._generalization_classes(relid oid, k int, columns text[], selection text,
                                             options text)
RETURNS bytea LANGUAGE plpython3u SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('distributed.generalization_sql.classes', relid, k, columns, selection, options)
$$;
#@WRAP deid.generalization_classes(source regclass, k int, columns text[] DEFAULT NULL, selection text DEFAULT NULL, options jsonb DEFAULT '{}') RETURNS bytea => deid._generalization_classes(source::oid, k, columns, selection, options::text)
COMMENT ON FUNCTION deid.generalization_classes(regclass, int, text[], text, jsonb) IS
  'Generalization over shards, on a node: the class table of its rows (002 step 1), packed. See deid.usage(''generalization_classes'').';

CREATE FUNCTION deid._generalization_levels(relid oid, k int, columns text[], selection text,
                                            options text, parts bytea[])
RETURNS jsonb LANGUAGE plpython3u SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('distributed.generalization_sql.levels', relid, k, columns, selection, options, parts)
$$;
#@WRAP deid.generalization_levels(source regclass, k int, columns text[], selection text, options jsonb, parts bytea[]) RETURNS jsonb => deid._generalization_levels(source::oid, k, columns, selection, options::text, parts)
COMMENT ON FUNCTION deid.generalization_levels(regclass, int, text[], text, jsonb, bytea[]) IS
  'Generalization over shards, on the coordinator: the nodes'' class tables merged and searched (002 step 3). See deid.usage(''generalization_levels'').';
