-- =====================================================================
-- The few places where deid holds a right beyond its catalog (README, "Security model").
-- Each is small, runs no caller code, and is executable only by deid_owner.
-- =====================================================================

-- Column roles of one relation, for the SECURITY INVOKER measurement and request code, which
-- cannot read deid.column_role itself: returned to a caller who may read some column of the
-- relation, holds a policy on it, or is a deid_admin.
CREATE FUNCTION deid._column_roles(relid oid, caller name)
RETURNS TABLE (column_name name, role text, hierarchy text, source text)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF caller IS NULL OR NOT pg_catalog.pg_has_role(session_user, caller, 'MEMBER') THEN
        RAISE EXCEPTION 'session may not act as the role it named' USING ERRCODE = 'insufficient_privilege',
              HINT = 'Call the public deid functions; they pass current_user.';
    END IF;
    RETURN QUERY
    SELECT r.column_name, r.role, r.hierarchy, r.source
      FROM deid.column_role r
     WHERE r.relation = relid
       AND (pg_catalog.has_any_column_privilege(caller, relid, 'SELECT')
            OR pg_catalog.pg_has_role(caller, 'deid_admin', 'MEMBER')
            OR EXISTS (SELECT 1 FROM deid.policy p WHERE p.relation = relid
                          AND pg_catalog.pg_has_role(caller, p.grantee, 'MEMBER')));
END $$;

-- COPY one of deid's private files (binary, or text format when its name ends in ".text";
-- written by copy_files.copy_fields under base/pgsql_tmp, mode 0600) into one of deid's own
-- tables. Owned by deid_loader, the only holder of pg_read_server_files. Before it reads a
-- byte it checks that nothing of a caller can run during the COPY: the target is a plain table
-- of deid_owner in schema deid or deid_release, without triggers, rules, row security or
-- defaults, every column of a type in pg_catalog; and that the file is one of deid's own: a
-- name of deid's temporary files, in a normalized absolute path whose directory resolves to
-- the server's own temporary directory (<data directory>/base/pgsql_tmp: the backend's working
-- directory, as copy_files._temp_path writes it), opened without following a link (O_NOFOLLOW,
-- relative to that directory), a regular file of the server's user with one link and no
-- access for others. PL/pgSQL cannot see links, hence PL/Python (created by the installing
-- superuser, given to deid_loader). The COPY reads the file it opened (/proc/self/fd/<n>: the
-- same backend), so nothing can swap it between the checks and the read.
CREATE FUNCTION deid._copy_in(target regclass, columns text[], path text)
RETURNS bigint LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp
-- deid writes text as UTF-8 bytes, and COPY (binary: the receive functions; text: the input)
-- converts text from the client encoding: pin it for the COPY, whatever the caller's session uses.
SET client_encoding = 'UTF8' AS $$
import os
import re
import stat


def refuse():
    plpy.error("deid._copy_in refuses this target or path", sqlstate="42501",
               hint="Only deid's own data path copies its own files into its own tables.")


ours = plpy.execute(plpy.prepare("""
    SELECT EXISTS (SELECT 1 FROM pg_class c
                    WHERE c.oid = $1 AND c.relkind = 'r' AND c.relowner = 'deid_owner'::regrole
                      AND c.relnamespace IN ('deid'::regnamespace, 'deid_release'::regnamespace)
                      AND NOT c.relhastriggers AND NOT c.relhasrules AND NOT c.relrowsecurity)
       AND NOT EXISTS (SELECT 1 FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
                        WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped
                          AND (t.typnamespace <> 'pg_catalog'::regnamespace OR a.atthasdef))
       AS ok""", ["regclass"]), [target])[0]["ok"]
if (not ours or path is None or os.path.normpath(path) != path
        or not re.fullmatch(r"/[^\n]*/base/pgsql_tmp/pgsql_tmpdeid[0-9]+\.[0-9]+(\.text)?", path)):
    refuse()
tmp = os.path.realpath(os.path.join(os.getcwd(), "base", "pgsql_tmp"))
if os.path.realpath(os.path.dirname(path)) != tmp:
    refuse()
try:
    directory = os.open(tmp, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        fd = os.open(os.path.basename(path), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK,
                     dir_fd=directory)
    finally:
        os.close(directory)
except OSError:
    refuse()
try:
    st = os.fstat(fd)
    if (not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_uid != os.geteuid()
            or st.st_mode & 0o077):
        refuse()
    opened = f"/proc/self/fd/{fd}"
    statement = plpy.execute(plpy.prepare(
        "SELECT format('COPY %s (%s) FROM %L WITH (FORMAT %s)', $1,"
        " (SELECT string_agg(quote_ident(c), ', ' ORDER BY o)"
        "    FROM unnest($2) WITH ORDINALITY AS u(c, o)), $3, $4) AS s",
        ["regclass", "text[]", "text", "text"]),
        [target, columns, opened if os.path.isdir("/proc/self/fd") else path,
         # the file's name tells its format: one of two fixed words, never text of the path
         "text" if path.endswith(".text") else "binary"])[0]["s"]
    return plpy.execute(statement).nrows()
finally:
    os.close(fd)
$$;

-- The reader of a policy's grantor: a policy-based request reads its source as the role that
-- granted the policy (README, "What a policy grants"). deid.allow_requests installs one per
-- grantor: a PL/Python SECURITY DEFINER function owned by the grantor, executable by
-- deid_owner only, whose one argument is the token of a request that deid's own code has
-- validated and planned in this backend's memory (pipeline.read_pending). It runs no SQL it
-- is given: it performs exactly that planned read, as the grantor. Before every use deid
-- checks that it is still exactly this function (deid._grantor_reader).
CREATE FUNCTION deid._reader_name(grantor name) RETURNS name LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp AS $$
    SELECT ('_reader_' || left(md5(grantor), 16))::name
$$;

-- The reader's body is the same text in every version of deid, so that the readers installed
-- before an ALTER EXTENSION UPDATE stay valid (deid._grantor_reader compares it): it names no
-- package directory. A reader runs only inside a request, after deid._request_begin has loaded
-- this version's package into the backend, and uses that package.
CREATE FUNCTION deid._reader_source() RETURNS text LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp AS $$
    SELECT E'\nfrom deid.pg import entry\nreturn entry("pipeline.read_pending", token)\n'
$$;

-- Superuser-owned (only a superuser creates PL/Python functions and gives them to any role).
CREATE FUNCTION deid._install_reader(grantor name)
RETURNS regprocedure LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    fn text := format('deid.%I(text)', deid._reader_name(grantor));
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = grantor)
       OR grantor IN ('deid_owner', 'deid_loader') THEN
        RAISE EXCEPTION 'no reader for role "%"', grantor USING ERRCODE = 'insufficient_privilege',
              HINT = 'A policy is granted by a role that may read the source itself.';
    END IF;
    IF to_regprocedure(fn) IS NOT NULL THEN           -- (IF EXISTS would say NOTICE when not)
        EXECUTE format('DROP FUNCTION %s', fn);
    END IF;
    EXECUTE format('CREATE FUNCTION %s RETURNS bigint LANGUAGE plpython3u SECURITY DEFINER'
                   ' SET search_path = pg_catalog, pg_temp AS %L',
                   replace(fn, '(text)', '(token text)'), deid._reader_source());
    EXECUTE format('ALTER FUNCTION %s OWNER TO %I', fn, grantor);
    EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', fn);
    EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO deid_owner', fn);
    RETURN fn::regprocedure;
END $$;

-- The grantor's reader if it is still exactly what _install_reader made, else NULL.
CREATE FUNCTION deid._grantor_reader(grantor name)
RETURNS regprocedure LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT p.oid::regprocedure
      FROM pg_proc p
     WHERE p.pronamespace = 'deid'::regnamespace AND p.proname = deid._reader_name(grantor)
       AND p.proowner = (SELECT oid FROM pg_roles WHERE rolname = grantor)
       AND p.prosecdef AND NOT p.proretset AND p.prorettype = 'bigint'::regtype
       AND p.prolang = (SELECT oid FROM pg_language WHERE lanname = 'plpython3u')
       AND p.prosrc = deid._reader_source()
       AND p.proconfig = ARRAY['search_path=pg_catalog, pg_temp']
       AND p.proargtypes = '25'::oidvector
$$;
