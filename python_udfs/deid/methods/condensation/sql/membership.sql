-- ---------------------------------------------------------------------
-- The one membership catalog of deid (since 1.1.0; sql/upgrade/1.1.0):
--   004 Def. 1 / Alg. 2: per cluster of a condensation release, the RIDs of the source
--   rows it condensed (clusters 0, 1, ...);
--   003 Fig. 6: per cluster of a disassociated release (<release>_cluster.cluster_id), the
--   record ids of its records (row id or options.record).
-- Ids sorted. Readable by deid_admin only (the release itself carries no row id); the
-- verifiers read it back before the request commits.
-- ---------------------------------------------------------------------
CREATE TABLE deid.cluster_member (
    release_id  bigint NOT NULL,           -- deid.release (append-only; no FK to keep writes fast)
    cluster_id  int    NOT NULL,           -- 0, 1, ... per release
    rids        bigint[] NOT NULL,         -- the cluster's source rows, sorted
    PRIMARY KEY (release_id, cluster_id)
);
ALTER TABLE deid.cluster_member ALTER rids SET STORAGE EXTERNAL;
COMMENT ON TABLE deid.cluster_member IS
  'Membership of condensation (004: source RIDs) and disassociation (003: record ids) releases, per cluster; deid_admin only';
REVOKE ALL ON deid.cluster_member FROM PUBLIC;
GRANT SELECT ON deid.cluster_member TO deid_admin;
SELECT pg_catalog.pg_extension_config_dump('deid.cluster_member', '');
