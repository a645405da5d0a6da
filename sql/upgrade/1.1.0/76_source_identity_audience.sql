-- 1.1.0: the composition rule's source identity and audiences (sql/00_catalog.sql,
-- python_udfs/deid/log/source_identity.py, log/audience.py). Grants, comments and
-- pg_extension_config_dump are re-run from sql/00_catalog.sql after the fragments.
ALTER TABLE deid.composition_reset ADD COLUMN IF NOT EXISTS relation text;

CREATE TABLE IF NOT EXISTS deid.release_identity (
    release_id  bigint NOT NULL,
    relation    text   NOT NULL,
    row_id      name   NOT NULL,
    PRIMARY KEY (release_id, relation)
);
CREATE INDEX IF NOT EXISTS release_identity_relation_idx ON deid.release_identity (relation);

CREATE TABLE IF NOT EXISTS deid.release_audience (
    release_id  bigint NOT NULL,
    audience    name   NOT NULL,
    granted_by  name   NOT NULL,
    granted_at  timestamptz NOT NULL DEFAULT now(),
    revoked_by  name,
    revoked_at  timestamptz,
    PRIMARY KEY (release_id, audience)
);

-- Earlier releases: each is a release of its own source (a view's base is not traced back
-- here), by the name it was logged under; with no deid.release_audience row, a release is
-- deid_reader's (log/audience.py).
INSERT INTO deid.release_identity (release_id, relation, row_id)
SELECT s.release_id, pg_catalog.format('%I.%I', pg_catalog.split_part(r.source_name, '.', 1),
                                       pg_catalog.substr(r.source_name,
                                           pg_catalog.strpos(r.source_name, '.') + 1)), s.row_id
  FROM deid.release_selection s JOIN deid.release r USING (release_id)
 WHERE pg_catalog.strpos(r.source_name, '.') > 0
ON CONFLICT DO NOTHING;
