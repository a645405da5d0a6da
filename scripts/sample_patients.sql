-- A generated sample of cancer-registry patient records (no real person).
-- Defines registry.generate_patients(n, seed) which (re)creates
-- registry.patients with n rows; skewed, tie-heavy distributions on purpose.
CREATE SCHEMA IF NOT EXISTS registry;
CREATE OR REPLACE FUNCTION registry.generate_patients(n int, seed float8 DEFAULT 0.42)
RETURNS bigint LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM setseed(seed);
    DROP TABLE IF EXISTS registry.patients;
    CREATE TABLE registry.patients (
        patient_id  bigint PRIMARY KEY,
        name        text NOT NULL,          -- identifier
        birth_date  date NOT NULL,
        age         int  NOT NULL,
        sex         text NOT NULL,
        race        text NOT NULL,
        zip         text NOT NULL,
        diagnosis   text NOT NULL,          -- sensitive (ICD-10-like)
        treatment   text NOT NULL,          -- sensitive
        pt          text NOT NULL,          -- tumour stage (002 use case)
        vital_status text NOT NULL,
        hospital    text NOT NULL           -- source system
    );
    INSERT INTO registry.patients
    SELECT i,
           'Patient ' || i,
           b,
           extract(year FROM age(DATE '2026-01-01', b))::int,
           CASE WHEN r1 < 0.55 THEN 'F' ELSE 'M' END,
           (ARRAY['white','white','white','white','black','black','asian','other'])[1 + floor(r2 * 8)::int],
           (10000 + floor(power(r3, 2) * 60)::int * 7)::text,
           (ARRAY['C50','C50','C50','C34','C34','C18','C61','C61','C43','C64','C67','C25','C71','C91','C56'])
               [1 + floor(power(r4, 1.5) * 15)::int],
           (ARRAY['surgery','surgery','chemo','chemo','radio','hormone','immuno','palliative','watch'])
               [1 + floor(r5 * 9)::int],
           (ARRAY['1a','1b','1c','1mic','2a','2b','3','4'])[1 + floor(power(r6, 1.3) * 8)::int],
           CASE WHEN r1 * r6 < 0.25 THEN 'dead' ELSE 'alive' END,
           (ARRAY['north','north','south','east'])[1 + floor(r2 * r3 * 4)::int]
      FROM (SELECT i, DATE '1930-01-01' + floor(power(random(), 0.8) * 27000)::int AS b,
                   random() AS r1, random() AS r2, random() AS r3, random() AS r4,
                   random() AS r5, random() AS r6
              FROM generate_series(1, n) AS i) s;
    ANALYZE registry.patients;
    RETURN n;
END $$;
