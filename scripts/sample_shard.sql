-- The sharded sample (scripts/shard-cluster.sh sample): run on every member of the warehouse
-- with psql variables n (patients), nodes (a power of 2) and part (this node's partition, -1
-- on the coordinator). Every member generates the same rows (scripts/sample_patients.sql,
-- one seed) and keeps those of its partition: hashint4(patient_id) & (nodes - 1), PL/Proxy's
-- own choice of partition for RUN ON hashint4(patient_id). The coordinator keeps the tables'
-- definitions, empty. The disassociation sample registry.diagnoses (long: patient, code) is
-- sharded by the same key, so that a record is whole on one node.
\set QUIET on
SET client_min_messages = warning;
\i scripts/sample_patients.sql
SELECT registry.generate_patients(:n, 0.42) \g /dev/null
DELETE FROM registry.patients
 WHERE :part < 0 OR (hashint4(patient_id::int) & (:nodes - 1)) <> :part;
DROP TABLE IF EXISTS registry.diagnoses;
SELECT setseed(0.42) \g /dev/null
CREATE TABLE registry.diagnoses AS
SELECT DISTINCT i::bigint AS patient_id,
       (ARRAY['401.9','250.00','272.4','427.31','428.0','414.01','496','599.0','244.9','530.81',
              '285.9','276.1','403.90','585.9','311','300.00','493.90','715.90'])
           [1 + floor(18 * power(random(), 1.6))::int] AS icd9
  FROM generate_series(1, :n) i, generate_series(1, 1 + (i * 7919) % 5) j;
DELETE FROM registry.diagnoses
 WHERE :part < 0 OR (hashint4(patient_id::int) & (:nodes - 1)) <> :part;
CREATE OR REPLACE VIEW registry.patients_survival AS
SELECT patient_id, age, sex, race, pt, CASE WHEN vital_status = 'dead' THEN 1 ELSE 0 END AS vital,
       1 + ((hashtext(patient_id::text) & 1023) + age) % 120 AS surv_months
  FROM registry.patients;
ANALYZE registry.patients;
ANALYZE registry.diagnoses;
-- the same roles on every member (each node keeps its own grants and policies)
SELECT deid.set_role('registry.patients', 'name', 'identifier') \g /dev/null
SELECT deid.set_role('registry.patients', c, 'quasi_identifier') FROM unnest('{age,sex,race,zip}'::text[]) c \g /dev/null
SELECT deid.set_role('registry.patients', c, 'sensitive') FROM unnest('{diagnosis,treatment}'::text[]) c \g /dev/null
-- generalization (002) needs a hierarchy per quasi-identifier on every node: the tumour stage's
SELECT deid.load_hierarchy('pt_stage', $csv$1a;1;[1-2];*
1b;1;[1-2];*
1c;1;[1-2];*
1mic;1;[1-2];*
2a;2;[1-2];*
2b;2;[1-2];*
3;3;[3-4];*
4;4;[3-4];*$csv$, info_loss => '{0,0.3,0.6,1}') \g /dev/null
SELECT deid.set_role('registry.patients', 'pt', 'quasi_identifier', 'pt_stage', source => 'pathology') \g /dev/null
SELECT deid.set_role('registry.patients_survival', c, 'quasi_identifier') FROM unnest('{age,sex,race,pt}'::text[]) c \g /dev/null
SELECT deid.set_role('registry.patients_survival', c, 'sensitive') FROM unnest('{surv_months,vital}'::text[]) c \g /dev/null
