-- make demo: the main job on the private cluster's database "deid".
-- Recreates the extension (the demo database is the demo's own), loads a
-- generated sample of 20,000 patient records and prints a report.
\set QUIET on
\pset footer off
SET client_min_messages = warning;
SET deid.drop_with_releases = on;       -- the demo database is the demo's own
DROP EXTENSION IF EXISTS deid CASCADE;
RESET deid.drop_with_releases;
CREATE EXTENSION deid CASCADE;
DROP VIEW IF EXISTS registry.patients_survival;
\i scripts/sample_patients.sql
SELECT registry.generate_patients(20000, 0.42) AS "sample rows generated";

\echo
\echo '== 1. Describe the data once: roles, hierarchies, sources =='
SELECT deid.interval_hierarchy('age_5y', 0, 120, '{5,10,20}') AS hierarchy;
SELECT deid.load_hierarchy('pt_stage', $csv$1a;1;[1-2];*
1b;1;[1-2];*
1c;1;[1-2];*
1mic;1;[1-2];*
2a;2;[1-2];*
2b;2;[1-2];*
3;3;[3-4];*
4;4;[3-4];*$csv$, info_loss => '{0,0.3,0.6,1}') AS hierarchy;
SELECT deid.load_hierarchy('sex', $csv$F;*
M;*$csv$) AS hierarchy;
SELECT deid.load_hierarchy('race', $csv$white;*
black;*
asian;*
other;*$csv$) AS hierarchy;
SELECT deid.set_role('registry.patients', 'name', 'identifier');
SELECT deid.set_role('registry.patients', 'age', 'quasi_identifier', 'age_5y', source => 'registry');
SELECT deid.set_role('registry.patients', 'sex', 'quasi_identifier', 'sex', source => 'registry');
SELECT deid.set_role('registry.patients', 'race', 'quasi_identifier', 'race', source => 'registry');
SELECT deid.set_role('registry.patients', 'zip', 'quasi_identifier', source => 'registry');
SELECT deid.set_role('registry.patients', 'pt', 'quasi_identifier', 'pt_stage', source => 'pathology');
SELECT deid.set_role('registry.patients', 'diagnosis', 'sensitive');
SELECT deid.set_role('registry.patients', 'treatment', 'sensitive');
SELECT column_name, role, hierarchy, source, data_type FROM deid.roles ORDER BY role, column_name;

\echo
\echo '== 2. How identifying is the raw table? =='
SELECT deid.k_anonymity('registry.patients', '{age,sex,race,zip}') AS "k over age, sex, race, zip",
       (SELECT count(*) FROM deid.equivalence_classes('registry.patients', '{age,sex,race,zip}')) AS classes,
       (SELECT count(*) FROM deid.equivalence_classes('registry.patients', '{age,sex,race,zip}')
         WHERE size = 1) AS "unique rows (size 1)",
       deid.k_anonymity('registry.patients', '{sex,race}') AS "k over sex, race";
SELECT CASE WHEN size = 1 THEN '1' WHEN size < 5 THEN '2-4' WHEN size < 10 THEN '5-9'
            ELSE '10+' END AS "class size", count(*) AS classes, sum(size) AS rows
  FROM deid.equivalence_classes('registry.patients', '{age,sex,race,zip}') GROUP BY 1 ORDER BY min(size);
SELECT min(l) AS "min L (diagnosis, treatment) over sex, race", max(l) AS "max L"
  FROM deid.l_diversity('registry.patients', '{sex,race}', '{diagnosis,treatment}');

\echo
\echo '== 3. An anatomy release: (K,L) = (50, 4) over diagnosis and treatment (paper 001) =='
SELECT release_id, relations, rows, groups, round(discernibility::numeric, 1) AS discernibility, verified
  FROM deid.anonymize_request('registry.patients', 'anatomy', k => 50, l => 4,
       columns => '{age,sex,race,zip,diagnosis,treatment}',
       options => '{"column_l": {"treatment": 2}, "seed": 7}', release => 'demo_anatomy');
SELECT group_id, count(*) AS rows, min(age) || '-' || max(age) AS age, string_agg(DISTINCT sex, ',') AS sex,
       count(DISTINCT zip) AS zips
  FROM release.demo_anatomy_qit GROUP BY group_id ORDER BY group_id LIMIT 5;
SELECT * FROM release.demo_anatomy_diagnosis WHERE group_id = 0;
SELECT metrics->'verification'->'kl'->>'min_size' AS "verified K (smallest group)",
       metrics->'verification'->'kl'->>'min_certified_l' AS "verified L (certificate)",
       seed FROM deid.release WHERE name = 'demo_anatomy';

\echo
\echo '== 4. A generalization request: Mamma carcinoma, stage 1 (paper 002) =='
SELECT release_id, relations, rows, groups, verified
  FROM deid.anonymize_request('registry.patients', 'generalization', k => 5,
       columns => '{age,sex,race,pt,diagnosis}',
       selection => $$diagnosis = 'C50' AND pt = '1'$$,
       options => '{"priorities": {"age": 0.3, "race": 0.2, "sex": 0.9, "pt": 0.8}, "seed": 7}',
       release => 'demo_generalized');
SELECT s->>'attribute' AS attribute, s->>'from' AS "from", s->>'to' AS "to", s->>'cost' AS cost
  FROM deid.release, jsonb_array_elements(metrics->'steps') AS s WHERE name = 'demo_generalized';
SELECT * FROM release.demo_generalized LIMIT 5;

\echo
\echo '== 5. A condensation release: synthetic rows, exact cluster means and covariances (paper 004) =='
-- the sample has no survival time: a view adds one (and codes the vital status 0/1)
CREATE VIEW registry.patients_survival AS
SELECT patient_id, age, sex, race, pt, CASE WHEN vital_status = 'dead' THEN 1 ELSE 0 END AS vital,
       1 + ((hashtext(patient_id::text) & 1023) + age) % 120 AS surv_months
  FROM registry.patients;
SELECT deid.set_role('registry.patients_survival', c, 'quasi_identifier') AS role
  FROM unnest('{age,sex,race,pt}'::text[]) c;
SELECT deid.set_role('registry.patients_survival', c, 'sensitive') AS role
  FROM unnest('{surv_months,vital}'::text[]) c;
SELECT release_id, relations, rows, groups, verified
  FROM deid.anonymize_request('registry.patients_survival', 'condensation', k => 50,
       columns => '{age,sex,race,pt,surv_months,vital}',
       options => '{"survival": {"time": "surv_months", "status": "vital"},
                    "weights": {"surv_months": 0.5}, "row_id": "patient_id", "seed": 7}',
       release => 'demo_synthetic');
SELECT * FROM release.demo_synthetic LIMIT 5;
SELECT 'source' AS "rows of", count(*) AS rows, round(avg(age), 3) AS "mean age",
       round(avg(surv_months), 3) AS "mean months", round(corr(age, surv_months)::numeric, 3) AS "corr",
       sum(vital) AS dead, count(*) FILTER (WHERE sex = 'F') AS women
  FROM registry.patients_survival
UNION ALL
SELECT 'release', count(*), round(avg(age), 3), round(avg(surv_months), 3),
       round(corr(age, surv_months)::numeric, 3), sum(vital), count(*) FILTER (WHERE sex = 'F')
  FROM release.demo_synthetic;
SELECT metrics->'cluster_sizes'->>'min' AS "smallest cluster (verified >= k)",
       metrics->'clusters_by_status' AS "clusters by status",
       metrics->'verification'->>'max_cov_error' AS "covariance error (x rtol 1e-9)",
       metrics->'verification'->>'stored_rows_match' AS "stored = computed",
       (SELECT count(*) FROM deid.cluster_member m WHERE m.release_id = r.release_id) AS "catalog clusters"
  FROM deid.release r WHERE name = 'demo_synthetic';

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
