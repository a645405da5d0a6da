-- deid 1.1.0: deid.equivalence_class keeps a generalization release's classes per source system
-- (002 sec. 2) in a new column `source`; the classes over all quasi-identifiers jointly are no
-- longer stored for generalization (they follow from the release). Rows of releases logged before
-- keep source NULL, which means exactly what they hold: classes over all of the release's
-- quasi-identifiers jointly. deid.verify_release checks a generalization release by grouping the
-- stored release per source, so old and new releases verify alike.
ALTER TABLE deid.equivalence_class ADD COLUMN IF NOT EXISTS source text;
