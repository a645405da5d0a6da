-- 1.1.0: the policy path lends no rights (a policy's reader ran code as its grantor).
-- Who reads as whom (deid.policy) and what a column is (deid.column_role) change only through
-- deid's functions: deid_admin keeps SELECT and loses its DML on both tables (1.0.0 granted
-- it; sql/00_catalog.sql re-runs the same REVOKE after the fragments).
REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON deid.column_role, deid.policy FROM deid_admin;

-- A policy may allow k per source system for generalization (002); by default a requester
-- without SELECT gets k over all released quasi-identifiers jointly.
ALTER TABLE deid.policy ADD COLUMN IF NOT EXISTS per_source_k boolean NOT NULL DEFAULT false;

-- deid.allow_requests gains the option per_source_k (the public function, its text overload
-- and the implementation are re-created with it).
DROP FUNCTION IF EXISTS deid.allow_requests(name, regclass, int, int);
DROP FUNCTION IF EXISTS deid.allow_requests(name, text, int, int);
DROP FUNCTION IF EXISTS deid._allow_requests(name, oid, int, int, name);
