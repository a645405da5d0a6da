-- 1.1.0: deid.release_selection.rids in a self-describing layout (python_udfs/deid/log/rowids.py):
-- the first byte names it, 'B' (the smallest id, then a bitmap of the span), 'R' (runs of
-- consecutive ids as first id and length) or 'I' (int8 big-endian ids, the layout
-- 72_release_selection.sql wrote). The rows written so far keep
-- their ids and get the 'I' byte; new releases write the smallest of the three, so that the
-- composition rule reads a hundred earlier releases of a million rows in kilobytes, not 800 MB.
DO $layout$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_constraint
                WHERE conrelid = 'deid.release_selection'::regclass
                  AND conname = 'release_selection_rids_check') THEN
        ALTER TABLE deid.release_selection DROP CONSTRAINT release_selection_rids_check;
        UPDATE deid.release_selection SET rids = '\x49'::bytea || rids;
    END IF;
END $layout$;
ALTER TABLE deid.release_selection DROP CONSTRAINT IF EXISTS release_selection_layout_check;
ALTER TABLE deid.release_selection ADD CONSTRAINT release_selection_layout_check CHECK (
    (get_byte(rids, 0) = 73 AND length(rids) = 8 * n + 1)
    OR (get_byte(rids, 0) = 66 AND length(rids) >= 9 + (n + 7) / 8)
    OR (get_byte(rids, 0) = 82 AND length(rids) % 16 = 1 AND length(rids) <= 16 * n + 1));
