-- make demo's step of this method (scripts/demo.sql runs each method's demo.sql, in the
-- registry's order: scripts/demo_steps.py)
\echo
\echo '== 4. A generalization request: Mamma carcinoma, stage 1 (paper 002) =='
-- diagnosis is not released: the anatomy release above publishes it for the same patients
-- (one method per sensitive column, docs/security.md); the selection fixes it anyway
SELECT release_id, relations, rows, groups, verified
  FROM deid.anonymize_request('registry.patients', 'generalization', k => 5,
       columns => '{age,sex,race,pt}',
       selection => $$diagnosis = 'C50' AND pt = '1'$$,
       options => '{"priorities": {"age": 0.3, "race": 0.2, "sex": 0.9, "pt": 0.8}, "seed": 7}',
       release => 'demo_generalized');
SELECT s->>'attribute' AS attribute, s->>'from' AS "from", s->>'to' AS "to", s->>'cost' AS cost
  FROM deid.release, jsonb_array_elements(metrics->'steps') AS s WHERE name = 'demo_generalized';
SELECT * FROM release.demo_generalized LIMIT 5;
