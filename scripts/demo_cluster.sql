-- make demo-cluster: on the coordinator of scripts/shard-cluster.sh (a coordinator and 2 nodes,
-- private clusters, the sharded sample loaded): every method requested once, through the same
-- front door, run on both nodes at once (generalization's class counts merged on the coordinator).
\set QUIET on
\pset footer off
SET client_min_messages = warning;
\echo '== The PL/Proxy cluster (SQL/MED: one option per node, no password) =='
SELECT srvname AS cluster, array_to_string(srvoptions, E'\n') AS partitions
  FROM pg_foreign_server WHERE srvname = 'deid_shards';
\echo
\echo '== 1. Register the sharded sources once (by the patient id) =='
SELECT deid.register_distributed_source(s, 'deid_shards', 'patient_id') AS registered
  FROM unnest('{registry.patients,registry.patients_survival,registry.diagnoses}'::regclass[]) s;
\echo
\echo '== 2. anatomy (001), (K,L) = (50, 4): (K,L) groups per node =='
SELECT * FROM deid.anonymize_request('registry.patients', 'anatomy', k => 50, l => 4,
       columns => '{age,sex,race,zip,diagnosis,treatment}', options => '{"seed": 7}',
       release => 'demo_cluster_anatomy');
SELECT node, count(DISTINCT group_id) AS groups, count(*) AS rows, min(size) AS "smallest group"
  FROM (SELECT node, group_id, count(*) OVER (PARTITION BY node, group_id) AS size
          FROM release.demo_cluster_anatomy_qit) q GROUP BY node ORDER BY node;
\echo
\echo '== 3. condensation (004), k = 50: clusters of >= k per node, synthetic rows =='
SELECT * FROM deid.anonymize_request('registry.patients_survival', 'condensation', k => 50,
       columns => '{age,sex,race,pt,surv_months,vital}',
       options => '{"survival": {"time": "surv_months", "status": "vital"}, "row_id": "patient_id", "seed": 7}',
       release => 'demo_cluster_synthetic');
SELECT node, count(*) AS rows, round(avg(age), 2) AS "mean age", round(avg(surv_months), 2) AS "mean months"
  FROM release.demo_cluster_synthetic GROUP BY ROLLUP (node) ORDER BY node;
\echo
\echo '== 4. disassociation (003), k = 5, m = 2: records whole on one node =='
SELECT * FROM deid.anonymize_request('registry.diagnoses', 'disassociation', k => 5,
       options => '{"m": 2, "record": "patient_id", "item": "icd9", "seed": 7}',
       release => 'demo_cluster_dx');
SELECT node, count(*) AS clusters, sum(size) AS records, min(size) AS "smallest cluster"
  FROM release.demo_cluster_dx_cluster GROUP BY node ORDER BY node;
\echo
\echo '== 5. the coordinator''s log: one row per release, its parts on the nodes =='
SELECT name, method, metrics->>'rows' AS rows, metrics->>'groups' AS groups,
       jsonb_array_length(parts) AS parts, finished_at::time(0) AS finished
  FROM deid.distributed_release ORDER BY release_id;
\echo
\echo '== 6. generalization (002), k = 2000: the nodes'' class counts merged and searched on the coordinator, =='
\echo '   every node stores its rows at the chosen levels, k checked over all the stored parts =='
SELECT * FROM deid.anonymize_request('registry.patients', 'generalization', k => 2000,
       columns => '{pt,diagnosis}', release => 'demo_cluster_generalized');
SELECT metrics->'generalization'->'levels' AS levels, metrics->'generalization'->'steps' AS steps,
       metrics->'verification'->'sources' AS "k over all parts"
  FROM deid.distributed_release WHERE name = 'demo_cluster_generalized';
SELECT pt, count(*) AS rows FROM release.demo_cluster_generalized GROUP BY pt ORDER BY pt;
