-- ---------------------------------------------------------------------
-- 004 Def. 1 / Alg. 2: the cluster membership of a condensation release.
-- One row per cluster: the RIDs of the source rows it condensed (sorted).
-- Readable by deid_admin only (the release itself carries no row id); the
-- verifier reads it back before the request commits.
-- ---------------------------------------------------------------------
CREATE TABLE deid.cluster_member (
    release_id  bigint NOT NULL,           -- deid.release (append-only; no FK to keep writes fast)
    cluster_id  int    NOT NULL,           -- 0, 1, ... per release
    rids        bigint[] NOT NULL,         -- the cluster's source rows, sorted
    PRIMARY KEY (release_id, cluster_id)
);
ALTER TABLE deid.cluster_member ALTER rids SET STORAGE EXTERNAL;
COMMENT ON TABLE deid.cluster_member IS
  'Condensation (004): the source rows (RIDs) of every cluster of a release; deid_admin only';
REVOKE ALL ON deid.cluster_member FROM PUBLIC;
GRANT SELECT ON deid.cluster_member TO deid_admin;
SELECT pg_catalog.pg_extension_config_dump('deid.cluster_member', '');
