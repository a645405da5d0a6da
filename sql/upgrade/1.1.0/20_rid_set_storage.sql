-- 1.1.0: the RID-set catalog's arrays are lz4-compressed where the server has lz4 (1.0.0
-- stored them uncompressed, STORAGE EXTERNAL, which stays where it has not). Existing rows
-- keep their form; new ones get the new one. Idempotent.
DO $storage$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_settings WHERE name = 'default_toast_compression'
                                                       AND 'lz4' = ANY (enumvals)) THEN
        ALTER TABLE deid.rid_set
            ALTER group_ids SET STORAGE EXTENDED, ALTER group_ids SET COMPRESSION lz4,
            ALTER value_list SET STORAGE EXTENDED, ALTER value_list SET COMPRESSION lz4,
            ALTER rid_counts SET STORAGE EXTENDED, ALTER rid_counts SET COMPRESSION lz4,
            ALTER rids SET STORAGE EXTENDED, ALTER rids SET COMPRESSION lz4;
    ELSE
        ALTER TABLE deid.rid_set ALTER group_ids SET STORAGE EXTERNAL,
            ALTER value_list SET STORAGE EXTERNAL, ALTER rid_counts SET STORAGE EXTERNAL,
            ALTER rids SET STORAGE EXTERNAL;
    END IF;
END $storage$;
