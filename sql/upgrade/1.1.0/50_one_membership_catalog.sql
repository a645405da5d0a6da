-- 1.1.0: one membership catalog. deid.disassociation_member (one row per record: release,
-- record id, cluster id) moves into deid.cluster_member (one row per cluster: release, cluster
-- id, the sorted ids of its members), which condensation releases already use; the table goes.
-- Disassociated releases keep their cluster ids (<release>_cluster.cluster_id), so
-- deid.verify_release and the audit read the same membership as before.
DO $membership$
BEGIN
    IF pg_catalog.to_regclass('deid.disassociation_member') IS NOT NULL THEN
        INSERT INTO deid.cluster_member (release_id, cluster_id, rids)
        SELECT m.release_id, m.cluster_id, array_agg(m.record_id ORDER BY m.record_id)
          FROM deid.disassociation_member m
         GROUP BY m.release_id, m.cluster_id;
        DROP TABLE deid.disassociation_member;
    END IF;
END
$membership$;
