-- =====================================================================
-- deid.drop_release and deid.verify_release for a distributed release, on the coordinator
-- (python_udfs/deid/distributed/releases.py, docs/sharding.md). The public wrappers call the
-- SECURITY INVOKER dispatchers below (PL/Proxy reaches the nodes as the caller); a name that
-- is no distributed release goes to deid._drop_release / deid._verify_release unchanged.
-- =====================================================================
CREATE FUNCTION deid._drop_release_any(release text, caller name)
RETURNS text LANGUAGE plpython3u SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('distributed.releases.drop', release, caller)
$$;
CREATE FUNCTION deid._verify_release_any(release text, caller name)
RETURNS jsonb LANGUAGE plpython3u SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('distributed.releases.verify', release, caller)
$$;
-- Coordinator: the distributed release of a name and the caller's right (as on one node).
CREATE FUNCTION deid._dist_release_of(release text, caller name, action text)
RETURNS text LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('distributed.releases.release_of', release, caller, action)
$$;
-- Coordinator: the views and the log row, once every node dropped its part.
CREATE FUNCTION deid._dist_drop_finish(release text, caller name)
RETURNS text LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('distributed.releases.drop_finish', release, caller)
$$;
-- Node (through PL/Proxy, as the caller): drop this node's part; verify it (deid_admin).
CREATE FUNCTION deid._dist_node_drop(run text, caller name)
RETURNS text LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('distributed.releases.node_drop', run, caller)
$$;
CREATE FUNCTION deid._dist_node_verify(run text, caller name)
RETURNS text LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('distributed.releases.node_verify', run, caller)
$$;
