-- make pgxn-check: the extension as `pgxn install` installed it, in a fresh database: created,
-- and one request released and verified. Fails (ON_ERROR_STOP) on any error or a wrong answer.
\set ON_ERROR_STOP on
SET client_min_messages = warning;
CREATE EXTENSION deid CASCADE;
SELECT extversion AS "deid version" FROM pg_extension WHERE extname = 'deid';
CREATE TABLE pgxn_patients AS
SELECT i AS id, 20 + i % 50 AS age, CASE WHEN i % 2 = 0 THEN 'F' ELSE 'M' END AS sex,
       'D' || (i % 7) AS dx
  FROM generate_series(1, 500) i;
ALTER TABLE pgxn_patients ADD PRIMARY KEY (id);
\o /dev/null
SELECT deid.set_role('pgxn_patients', c, 'quasi_identifier') FROM unnest('{age,sex}'::text[]) c;
SELECT deid.set_role('pgxn_patients', 'dx', 'sensitive');
\o
SELECT rows, verified FROM deid.anonymize_request('pgxn_patients', 'anatomy', k => 10, l => 2,
       columns => '{age,sex,dx}', options => '{"seed": 1}', release => 'pgxn_check') \gset
SELECT (:rows = 500 AND :'verified'::boolean) AS ok \gset
\if :ok
\echo 'pgxn-check: anatomy release of 500 rows, verified'
\else
\echo 'pgxn-check: the release is wrong'
SELECT 1/0;
\endif
