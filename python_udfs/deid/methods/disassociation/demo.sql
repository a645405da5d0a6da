-- make demo's step of this method (scripts/demo.sql runs each method's demo.sql, in the
-- registry's order: scripts/demo_steps.py)
\echo '== 6. Diagnosis-code sets disassociated: k^m-anonymity, k = 5, m = 2 (paper 003) =='
DROP TABLE IF EXISTS registry.diagnoses;
\set dx_codes '401.9 250.00 272.4 427.31 428.0 414.01 496 599.0 244.9 530.81 285.9 276.1 403.90 585.9 311 300.00 493.90 715.90 786.50 780.79 411.1 424.1 434.91 V45.81 V58.61 278.00 327.23 365.9 366.9 592.0'
SELECT setseed(0.42) \g /dev/null
CREATE TABLE registry.diagnoses AS
SELECT DISTINCT i AS patient_id,
       (string_to_array(:'dx_codes', ' '))[1 + floor(30 * power(random(), 1.6))::int] AS icd9
  FROM generate_series(1, 5000) i, generate_series(1, 1 + (i * 7919) % 7) j;
SELECT count(DISTINCT patient_id) AS patients, count(*) AS "diagnosis rows" FROM registry.diagnoses;
\echo '-- the ICD-9 hierarchy (code -> 3-digit category -> section -> chapter, bench/disassociation/icd9_hierarchy.py)'
\echo '-- and 003''s level-1 utility policy built from it (one constraint per 3-digit category):'
\set icd9_rows `python3 bench/disassociation/icd9_hierarchy.py :dx_codes`
SELECT deid.drop_hierarchy('demo_icd9') FROM deid.hierarchy WHERE name = 'demo_icd9' \g /dev/null
SELECT deid.load_hierarchy('demo_icd9', :'icd9_rows');
SELECT jsonb_array_length(deid.utility_policy('demo_icd9', 1)) AS "level-1 constraints",
       deid.utility_policy('demo_icd9', 2) AS "level-2 policy (sections)";
SELECT release_id, relations, rows AS records, groups AS clusters, verified
  FROM deid.anonymize_request('registry.diagnoses', 'disassociation', k => 5,
       options => jsonb_build_object('m', 2, 'record', 'patient_id', 'item', 'icd9', 'seed', 7,
                                     'utility', deid.utility_policy('demo_icd9', 1))::text,
       release => 'demo_dx');
SELECT * FROM release.demo_dx_cluster ORDER BY cluster_id LIMIT 3;
\echo '-- the record chunks of the cluster with the most chunks (one row per subrecord):'
SELECT cluster_id, chunk_id, codes FROM release.demo_dx_record_chunk
 WHERE cluster_id = (SELECT cluster_id FROM release.demo_dx_record_chunk GROUP BY 1
                      ORDER BY count(DISTINCT chunk_id) DESC, 1 LIMIT 1)
 ORDER BY chunk_id, codes::text;
SELECT cluster_id, string_agg(code, ', ' ORDER BY code) AS "item chunk"
  FROM release.demo_dx_item_chunk GROUP BY 1 ORDER BY 1 LIMIT 3;
SELECT shared_id, min(cluster_ids) AS cluster_ids, count(*) AS subrecords
  FROM release.demo_dx_shared_chunk GROUP BY 1 ORDER BY 1 LIMIT 5;
SELECT metrics->'verification'->>'min_cluster_size' AS "verified k (smallest cluster)",
       metrics->'verification'->>'min_itemset_support' AS "least support of an itemset of <= m codes in a chunk",
       seed FROM deid.release WHERE name = 'demo_dx';
\echo '-- a reconstructed data set (003 Fig. 5) that analysts query with plain SQL:'
SELECT deid.reconstruct('demo_dx', 'demo_dx_r1', 1) AS "records reconstructed";
SELECT * FROM release.demo_dx_r1 ORDER BY record_id LIMIT 5;
SELECT (SELECT count(*) FROM (SELECT patient_id FROM registry.diagnoses WHERE icd9 IN ('401.9', '250.00')
                               GROUP BY 1 HAVING count(*) = 2) s) AS "true count (401.9 and 250.00)",
       (SELECT count(*) FROM release.demo_dx_r1 WHERE codes @> '{401.9,250.00}') AS "count on the reconstruction";
