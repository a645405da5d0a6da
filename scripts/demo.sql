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

-- each method's step: its folder's demo.sql (python_udfs/deid/methods/<method>/demo.sql), in the
-- registry's order
\set method_steps `python3 scripts/demo_steps.py`
\i :method_steps
