-- Golden test of deid's visible surface (pg_regress style): help texts, error messages
-- with their SQLSTATE and HINT, and result shapes. Run by tests/integration/test_golden.py;
-- the output must equal expected/surface.out (DEID_GOLDEN_UPDATE=1 rewrites it).
\set VERBOSITY verbose
\set SHOW_CONTEXT never
\pset footer off
SET client_min_messages = warning;
SET lc_messages = 'C';
DROP SCHEMA IF EXISTS golden CASCADE;
CREATE SCHEMA golden;
CREATE TABLE golden.patients (id int PRIMARY KEY, name text, age int, sex text, zip text, dx text);
INSERT INTO golden.patients
SELECT i, 'Person ' || i, 20 + i % 30, CASE WHEN i % 2 = 0 THEN 'F' ELSE 'M' END,
       (10000 + i % 4)::text, 'D' || (i % 5) FROM generate_series(1, 200) i;
SELECT deid.set_role('golden.patients', 'name', 'identifier');
SELECT deid.set_role('golden.patients', c, 'quasi_identifier') FROM unnest('{age,sex,zip}'::text[]) c;
SELECT deid.set_role('golden.patients', 'dx', 'sensitive');

-- help
SELECT deid.usage();
SELECT deid.usage('anonymize_request');
SELECT deid.usage('k_anonymity');
SELECT deid.usage('set_role');
SELECT deid.usage('allow_requests');
SELECT deid.usage('reconstruct');

-- errors: SQLSTATE, message and HINT
SELECT deid.k_anonymity('golden.nope');
SELECT deid.k_anonymity(NULL);
SELECT deid.k_anonymity('golden.patients', '{nope}');
SELECT * FROM deid.anonymize_request('golden.patients', 'magic', k => 5);
SELECT * FROM deid.anonymize_request('golden.patients', 'anatomy', k => 1);
SELECT * FROM deid.anonymize_request('golden.patients', 'anatomy', k => 5, columns => '{age,name}');
SELECT * FROM deid.anonymize_request('golden.patients', 'anatomy', k => 5, options => '{bad');
SELECT * FROM deid.anonymize_request('golden.patients', 'anatomy', k => 5, options => '{"seed": "7"}');
SELECT * FROM deid.anonymize_request('golden.patients', 'anatomy', k => 5, options => '{"bogus": 1}');
SELECT * FROM deid.anonymize_request('golden.patients', 'anatomy', k => 5, selection => 'age IN (SELECT 1)');
SELECT * FROM deid.anonymize_request('golden.patients', 'anatomy', k => 5, selection => 'age = ''x''');
SELECT * FROM deid.anonymize_request('golden.patients', 'anatomy', k => 500, columns => '{age,sex,dx}');
SELECT * FROM deid.anonymize_request('golden.patients', 'generalization', k => 5, columns => '{age,sex}');
SELECT deid.drop_release(NULL);
SELECT * FROM deid.anonymize_request('golden.patients', 'disassociation', k => 5, columns => '{dx}');
SELECT * FROM deid.anonymize_request('golden.patients', 'disassociation', k => 1, columns => '{dx}');
SELECT deid.reconstruct('golden_nope', 'golden_r', 1);
SELECT deid.drop_release('golden_nope');

-- result shapes
SELECT release_id IS NOT NULL AS has_id, relations, rows, groups, round(discernibility::numeric, 3) AS dm, verified
  FROM deid.anonymize_request('golden.patients', 'anatomy', k => 10, l => 3, columns => '{age,sex,zip,dx}',
                              options => '{"seed": 1}', release => 'golden_rel');
\d release.golden_rel_qit
\d release.golden_rel_dx
SELECT group_id, dx, count FROM release.golden_rel_dx ORDER BY 1, 2 LIMIT 8;
SELECT count(DISTINCT group_id) AS groups, min(n) AS smallest
  FROM (SELECT group_id, count(*) n FROM release.golden_rel_qit GROUP BY 1) g;
SELECT name, method, seed, status, relations, parameters->'options' AS options,
       metrics ?& '{verification,seconds,rows,groups}' AS metrics_keys
  FROM deid.release WHERE name = 'golden_rel';
SELECT * FROM deid.anonymize_request('golden.patients', 'anatomy', k => 10, columns => '{age,sex,dx}',
                                     release => 'golden_rel');
SELECT deid.drop_release('golden_rel');

-- standard hierarchies: what is shipped, bad arguments, codes a hierarchy lacks (how many, which)
SELECT deid.usage('load_standard_hierarchy');
SELECT deid.usage('date_hierarchy');
SELECT deid.usage('age_hierarchy');
SELECT deid.load_standard_hierarchy('icd11', 'golden_h');
SELECT deid.date_hierarchy('golden_h', '2020-01-02', '2020-01-01');
SELECT deid.age_hierarchy('golden_h', 0);
SELECT deid.load_hierarchy('golden_dx', 'D0;*');
SELECT deid.set_role('golden.patients', 'dx', 'sensitive', 'golden_dx');
SELECT deid.drop_hierarchy('golden_dx');

-- unclassify
SELECT deid.usage('unset_role');
SELECT deid.usage('clear_roles');
SELECT deid.usage('verify_release');
SELECT deid.verify_release('golden_nope');
SELECT deid.unset_role('golden.patients', 'nope');
SELECT deid.unset_role('golden.patients', 'zip');
SELECT deid.clear_roles('golden.patients');
SELECT count(*) AS roles_left FROM deid.roles WHERE relation = 'golden.patients'::regclass;
DROP SCHEMA golden CASCADE;
