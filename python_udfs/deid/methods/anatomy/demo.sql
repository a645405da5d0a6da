-- make demo's step of this method (scripts/demo.sql runs each method's demo.sql, in the
-- registry's order: scripts/demo_steps.py)
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
