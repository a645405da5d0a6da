-- =====================================================================
-- Disassociation (paper 003): the reconstructions and deid.reconstruct.
-- =====================================================================
-- 003 Fig. 6: HORPART puts every record in one cluster; the release shows clusters, never
-- which record is in which. deid keeps that for audit (and for the verifier, which checks the
-- stored chunks against the source record for record through it) in deid.cluster_member
-- (methods/condensation/sql/membership.sql), each cluster's record ids.

-- The reconstructions drawn from a release (deid.reconstruct); dropped with their release.
CREATE TABLE deid.reconstruction (
    release_id    bigint NOT NULL,         -- deid.release
    relation      text   NOT NULL,         -- release.<target>
    seed          int    NOT NULL,
    requested_by  name   NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    colocate      double precision NOT NULL DEFAULT 0   -- 0: 003's random deal; > 0: the
                                                        -- release's utility policy followed
);
REVOKE ALL ON deid.reconstruction FROM PUBLIC;
GRANT SELECT ON deid.reconstruction TO deid_admin;
SELECT pg_catalog.pg_extension_config_dump('deid.reconstruction', '');

-- 003 Fig. 5: one data set D' of the disassociated release's I(D^A), written as
-- release.<into> (record_id, codes text[]) from the release's STORED chunks only; with
-- colocate > 0, the pieces of one utility constraint of the release's (public) policy go to
-- one record with that probability (releases/constrained_assignment.py).
CREATE FUNCTION deid._reconstruct(release text, target text, seed int, colocate double precision,
                                  caller name)
RETURNS bigint LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('releases.reconstruct.reconstruct', release, target, seed, caller, colocate)
$$;
-- The public function reaches it through deid._reconstruct_any (sql/47_distributed_releases.sql),
-- which sends a distributed release's name to every node's part instead.
#@WRAP deid.reconstruct(release text, target text, seed int DEFAULT 0, colocate double precision DEFAULT 0) RETURNS bigint => deid._reconstruct_any(release, target, seed, colocate, current_user)

-- 003 Sec. 6.1: a hierarchy-based utility policy (one constraint per node at `level`) as the
-- JSON list of code lists that options.utility takes. deid_admin only (hierarchies are its
-- catalog).
CREATE FUNCTION deid._utility_policy(hierarchy text, level int, caller name)
RETURNS jsonb LANGUAGE plpython3u STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('releases.utility.utility_policy', hierarchy, level, caller)
$$;
#@WRAP deid.utility_policy(hierarchy text, level int) RETURNS jsonb => deid._utility_policy(hierarchy, level, current_user)

-- 003 Sec. 3.1: a utility policy kept as a relation of (constraint, code) rows, read as the
-- caller (SECURITY INVOKER), as that JSON list; overlapping constraints are refused.
CREATE FUNCTION deid._utility_from(relation oid, constraint_column text, code_column text)
RETURNS jsonb LANGUAGE plpython3u STABLE SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('releases.utility.utility_from', relation, constraint_column, code_column)
$$;
#@WRAP deid.utility_from(relation regclass, constraint_column text DEFAULT 'constraint_id', code_column text DEFAULT 'code') RETURNS jsonb => deid._utility_from(relation::oid, constraint_column, code_column)
