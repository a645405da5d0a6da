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

-- The node's side of a distributed generalization request (coordinator: distributed/
-- coordinator.py, strategy "global_merge"; the PL/Proxy functions deid._dist_gen_classes,
-- deid._dist_store_part and deid._dist_gen_stored are installed with the others by
-- deid._install_proxies, sql/40_distributed.sql).
-- As the caller: its class table; its read kept in this backend for the store step of the
-- same run by the same role (distributed/read_cache.py).
CREATE FUNCTION deid._dist_node_gen_classes(run text, source text, k int, columns text[],
                                            selection text, options text)
RETURNS bytea LANGUAGE plpython3u SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('distributed.generalization_sql.node_classes', run, source, k, columns, selection, options)
$$;
-- As the caller: its rows (it holds SELECT: those its class step of this run read, else read
-- again), then the definer below stores the part at the chosen levels and holds it pending in
-- the same call (never readable before the coordinator's check and log).
CREATE FUNCTION deid._dist_node_store_part(run text, coord_release bigint, source text, k int,
                                           columns text[], selection text, options text,
                                           release text, chosen text)
RETURNS text LANGUAGE plpython3u SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('distributed.generalization_sql.store_part', run, coord_release, source, k, columns, selection, options, release, chosen)
$$;
CREATE FUNCTION deid._dist_part_finish(token text, caller name, run text, coord_release bigint,
                                       chosen text)
RETURNS text LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('distributed.generalization_sql.finish_part', token, caller, run, coord_release, chosen)
$$;
-- The classes of what a pending generalization part stored (its requester only), for the
-- coordinator's check of k over all the parts (verify/shared/merged_classes.py).
CREATE FUNCTION deid._dist_node_gen_stored(run text, caller name)
RETURNS text LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('distributed.generalization_sql.stored', run, caller)
$$;

-- A requester without SELECT (a policy's): the sealed path (python_udfs/deid/distributed/
-- sealed_generalization.py, docs/sharding.md). Every reply of a node that holds its own
-- counts is sealed by a node's definer and opened only by the coordinator's; the choice is
-- sealed for the nodes' definers. The PL/Proxy functions deid._dist_gen_classes_sealed,
-- deid._dist_store_part_sealed and deid._dist_gen_stored_sealed are installed by
-- deid._install_proxies (sql/40_distributed.sql).
-- Node, as the caller: the request begun as on one node (a policy's grantor reads) ...
CREATE FUNCTION deid._dist_node_gen_sealed_classes(run text, source text, k int, columns text[],
                                                   selection text, options text)
RETURNS bytea LANGUAGE plpython3u SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('distributed.sealed_generalization.classes', run, source, k, columns, selection, options)
$$;
-- ... and its class table sealed.
CREATE FUNCTION deid._dist_seal_classes(token text, caller name, run text)
RETURNS bytea LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('distributed.sealed_generalization.seal_classes', token, caller, run)
$$;
-- Node, as the caller: the request begun again; then its part stored at the sealed choice,
-- held pending, its report sealed.
CREATE FUNCTION deid._dist_node_store_part_sealed(run text, coord_release bigint, source text,
                                                  k int, columns text[], selection text,
                                                  options text, release text, chosen text)
RETURNS text LANGUAGE plpython3u SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('distributed.sealed_generalization.store', run, coord_release, source, k, columns, selection, options, release, chosen)
$$;
CREATE FUNCTION deid._dist_part_finish_sealed(token text, caller name, run text,
                                              coord_release bigint, chosen text)
RETURNS text LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('distributed.sealed_generalization.finish', token, caller, run, coord_release, chosen)
$$;
-- Node: the stored classes of its pending part (its requester), sealed.
CREATE FUNCTION deid._dist_node_gen_stored_sealed(run text, caller name)
RETURNS text LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('distributed.sealed_generalization.stored', run, caller)
$$;
-- Coordinator: the nodes' sealed tables opened, merged and searched; the choice sealed.
CREATE FUNCTION deid._dist_gen_choose(token text, caller name, run text, tables bytea[])
RETURNS text LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('distributed.coordinator.sealed_choose', token, caller, run, tables)
$$;
-- Coordinator: the parts' sealed reports and stored classes opened and checked, kept for
-- deid._dist_finish.
CREATE FUNCTION deid._dist_gen_accept(run text, caller name, parts text[], stored text[],
                                      checks text[])
RETURNS text LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('distributed.coordinator.sealed_accept', run, caller, parts, stored, checks)
$$;
