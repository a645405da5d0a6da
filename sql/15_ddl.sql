-- =====================================================================
-- The catalog follows DDL (README, "Operating deid").
--   sql_drop          a dropped table, view or column loses its roles and policies
--   ddl_command_end   a renamed column keeps its role (a renamed table keeps its OID anyway)
--   ddl_command_start DROP EXTENSION deid refuses while releases exist
-- The functions are SECURITY DEFINER (deid_owner, by sql/90's ownership loop) with a pinned
-- search_path; they read only pg_event_trigger_dropped_objects() / _ddl_commands(), pg_catalog
-- and deid's own tables, so no caller code runs with deid's rights. The cleanup never lets an
-- error escape into DDL that has nothing to do with deid: it becomes a WARNING.
-- =====================================================================

-- sql_drop: DROP TABLE / VIEW / ... / DROP SCHEMA CASCADE / DROP OWNED / ALTER TABLE DROP COLUMN.
-- A dropped relation's releases stay (snapshots); their log row's source becomes NULL.
-- Not DROP EXTENSION: objects of other extensions are theirs (and deid's own drop removes
-- its catalog with it). A table dropped and re-created under the same name is a new table:
-- it starts unclassified (README: a classification carried over by name could release an
-- identifier of the new table as a quasi-identifier).
CREATE FUNCTION deid._on_sql_drop() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r record;
    n_roles bigint;
    n_policies bigint;
BEGIN
    FOR r IN
        SELECT d.objid, d.object_type, d.address_names, d.object_identity
          FROM pg_catalog.pg_event_trigger_dropped_objects() d
         WHERE d.classid = 'pg_catalog.pg_class'::regclass
           AND d.object_type IN ('table', 'view', 'materialized view', 'foreign table',
                                 'table column')
    LOOP
        BEGIN
            IF r.object_type = 'table column' THEN
                DELETE FROM deid.column_role
                 WHERE relation::oid = r.objid AND column_name = r.address_names[3];
                GET DIAGNOSTICS n_roles = ROW_COUNT;
                n_policies := 0;
            ELSE
                DELETE FROM deid.column_role WHERE relation::oid = r.objid;
                GET DIAGNOSTICS n_roles = ROW_COUNT;
                DELETE FROM deid.policy WHERE relation::oid = r.objid;
                GET DIAGNOSTICS n_policies = ROW_COUNT;
                -- releases are snapshots and stay; their log forgets the dead OID
                UPDATE deid.release SET source = NULL WHERE source::oid = r.objid;
                -- a distributed source is registered no more (sql/40_distributed.sql)
                DELETE FROM deid.distributed_source WHERE source = r.objid;
                UPDATE deid.distributed_release SET source = NULL WHERE source = r.objid;
            END IF;
            IF n_roles + n_policies > 0 THEN
                RAISE NOTICE 'deid: % % dropped: removed % column role(s) and % polic%',
                    r.object_type, r.object_identity, n_roles, n_policies,
                    CASE WHEN n_policies = 1 THEN 'y' ELSE 'ies' END;
            END IF;
        EXCEPTION WHEN OTHERS THEN
            RAISE WARNING 'deid: could not remove the catalog rows of dropped % %: %',
                r.object_type, r.object_identity, SQLERRM
                USING HINT = 'Remove them with deid.clear_roles(...) or DELETE FROM deid.policy.';
        END;
    END LOOP;
END $$;

-- ddl_command_end on ALTER ... RENAME COLUMN: PostgreSQL reports the renamed column as
-- (relation, attnum); its old name is the one role row of that relation whose column no
-- longer exists (a dropped column's row is gone already, see above). Renaming a table keeps
-- its OID, and deid.column_role keys relations by OID (regclass): nothing to do.
CREATE FUNCTION deid._on_ddl_end() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r record;
    new_name name;
    stale name[];
BEGIN
    FOR r IN
        SELECT DISTINCT c.objid, c.objsubid
          FROM pg_catalog.pg_event_trigger_ddl_commands() c
         WHERE c.classid = 'pg_catalog.pg_class'::regclass AND c.object_type = 'table column'
           AND c.objsubid > 0
    LOOP
        BEGIN
            SELECT a.attname INTO new_name FROM pg_catalog.pg_attribute a
             WHERE a.attrelid = r.objid AND a.attnum = r.objsubid AND NOT a.attisdropped;
            SELECT array_agg(cr.column_name) INTO stale FROM deid.column_role cr
             WHERE cr.relation::oid = r.objid
               AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a
                                WHERE a.attrelid = r.objid AND a.attname = cr.column_name
                                  AND a.attnum > 0 AND NOT a.attisdropped);
            IF new_name IS NULL OR stale IS NULL THEN
                CONTINUE;
            END IF;
            IF cardinality(stale) = 1 AND NOT EXISTS (
                    SELECT 1 FROM deid.column_role
                     WHERE relation::oid = r.objid AND column_name = new_name) THEN
                UPDATE deid.column_role SET column_name = new_name
                 WHERE relation::oid = r.objid AND column_name = stale[1];
            ELSE
                RAISE WARNING 'deid: cannot tell which classified column of % was renamed',
                    r.objid::regclass
                    USING HINT = 'Check SELECT * FROM deid.roles and fix it with deid.set_role '
                                 'and deid.unset_role.';
            END IF;
        EXCEPTION WHEN OTHERS THEN
            RAISE WARNING 'deid: could not follow a column rename of %: %', r.objid::regclass, SQLERRM
                USING HINT = 'Check SELECT * FROM deid.roles.';
        END;
    END LOOP;
END $$;

-- DROP EXTENSION deid would remove every release (tables, views, and with CASCADE the
-- analysts' own views over them) and the audit log: it refuses while committed releases exist,
-- unless the session has said so (SET deid.drop_with_releases = on). ddl_command_start is the
-- only event that still sees deid during its own drop; it does not say which extension is
-- dropped, so the statement's text is read (a DROP EXTENSION hidden in dynamic SQL is not
-- seen -- this is a safety net for a DBA, not a security boundary: only a superuser may drop
-- deid).
CREATE FUNCTION deid._on_drop_extension() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    q text := lower(coalesce(pg_catalog.current_query(), ''));
    n bigint;
    names text;
BEGIN
    IF q !~ 'drop\s+extension\s+(if\s+exists\s+)?([a-z0-9_"]+\s*,\s*)*"?deid"?\s*(,|;|cascade|restrict|$)'
       OR coalesce(current_setting('deid.drop_with_releases', true), '') IN ('on', 'true', '1') THEN
        RETURN;
    END IF;
    SELECT count(*), string_agg(name, ', ' ORDER BY release_id) FILTER (WHERE rn <= 5)
      INTO n, names
      FROM (SELECT name, release_id, row_number() OVER (ORDER BY release_id) AS rn
              FROM deid.release WHERE status = 'committed') s;
    IF n > 0 THEN
        RAISE EXCEPTION 'deid holds % committed release(s) (%): DROP EXTENSION deid would remove them',
                n, names || CASE WHEN n > 5 THEN ', ...' ELSE '' END
              USING ERRCODE = 'dependent_objects_still_exist',
                    DETAIL = 'Their tables in deid_release, their views in schema release, every '
                             'view built on those, the release log and the catalog would be dropped.',
                    HINT = 'Drop the releases first (SELECT deid.drop_release(name) FROM deid.release '
                           'WHERE status = ''committed''), or SET deid.drop_with_releases = on and '
                           'DROP EXTENSION deid CASCADE to remove them all.';
    END IF;
END $$;

CREATE EVENT TRIGGER deid_sql_drop ON sql_drop
    WHEN TAG IN ('DROP TABLE', 'DROP VIEW', 'DROP MATERIALIZED VIEW', 'DROP FOREIGN TABLE',
                 'DROP SCHEMA', 'DROP OWNED', 'ALTER TABLE', 'ALTER FOREIGN TABLE')
    EXECUTE FUNCTION deid._on_sql_drop();
CREATE EVENT TRIGGER deid_ddl_end ON ddl_command_end
    WHEN TAG IN ('ALTER TABLE', 'ALTER VIEW', 'ALTER MATERIALIZED VIEW', 'ALTER FOREIGN TABLE')
    EXECUTE FUNCTION deid._on_ddl_end();
CREATE EVENT TRIGGER deid_drop_extension ON ddl_command_start
    WHEN TAG IN ('DROP EXTENSION')
    EXECUTE FUNCTION deid._on_drop_extension();
