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
-- A deid_admin's drop of a release with a part on a node lost for good
-- (python_udfs/deid/distributed/forced_drop.py): the parts every other node holds, the
-- coordinator's views and log row, and this row, naming the parts left on the lost nodes.
CREATE TABLE deid.distributed_forced_drop (
    release_id    bigint PRIMARY KEY,      -- the coordinator's release id of the dropped release
    name          text NOT NULL,
    run           text NOT NULL,
    cluster       name NOT NULL,
    requested_by  name NOT NULL,
    lost          jsonb NOT NULL,          -- [{node, release_id}] of the parts not dropped
    dropped_by    name NOT NULL,
    dropped_at    timestamptz NOT NULL DEFAULT clock_timestamp()
);
COMMENT ON TABLE deid.distributed_forced_drop IS
  'Distributed releases a deid_admin dropped with force while a node was unreachable: the parts left on it.';
SELECT pg_catalog.pg_extension_config_dump('deid.distributed_forced_drop', '');
REVOKE ALL ON deid.distributed_forced_drop FROM PUBLIC;
GRANT SELECT ON deid.distributed_forced_drop TO deid_admin;
CREATE FUNCTION deid._drop_release_forced(release text, force boolean, caller name)
RETURNS text LANGUAGE plpython3u SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('distributed.forced_drop.drop', release, force, caller)
$$;
#@WRAP deid.drop_release(release text, force boolean) RETURNS text => deid._drop_release_forced(release, force, current_user)
COMMENT ON FUNCTION deid.drop_release(text, boolean) IS
  'Drop a release; force (a deid_admin): a distributed release with a part on a node lost for good, logged in deid.distributed_forced_drop.';
CREATE FUNCTION deid._dist_drop_forced(release text, caller name, lost text)
RETURNS text LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('distributed.forced_drop.forced_finish', release, caller, lost)
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

-- deid.reconstruct of a distributed disassociation release (python_udfs/deid/distributed/
-- reconstruct.py): as the caller, every node draws a reconstruction of its own part; a name
-- that is no distributed release goes to deid._reconstruct unchanged.
CREATE FUNCTION deid._reconstruct_any(release text, target text, seed int,
                                      colocate double precision, caller name)
RETURNS bigint LANGUAGE plpython3u SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('distributed.reconstruct.reconstruct', release, target, seed, colocate, caller)
$$;
-- Coordinator: the release, checked for the caller as on one node, and its run's proof.
CREATE FUNCTION deid._dist_reconstruct_of(release text, target text, caller name)
RETURNS text LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('distributed.reconstruct.reconstruct_of', release, target, caller)
$$;
-- Coordinator: the view over every node's reconstruction and its log row.
CREATE FUNCTION deid._dist_reconstruct_finish(release text, target text, seed int,
                                              colocate double precision, caller name)
RETURNS text LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('distributed.reconstruct.finish', release, target, seed, colocate, caller)
$$;
-- Node (through PL/Proxy, as the caller): check, draw or undo the reconstruction of this
-- node's part of a logged run (the run's proof).
CREATE FUNCTION deid._dist_node_reconstruct(run text, proof text, target text, seed int,
                                            colocate double precision, step text, caller name)
RETURNS text LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('distributed.reconstruct.node_step', run, proof, target, seed, colocate, step,
             caller)
$$;
