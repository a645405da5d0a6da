-- make demo's step of this method (scripts/demo.sql runs each method's demo.sql, in the
-- registry's order: scripts/demo_steps.py)
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
