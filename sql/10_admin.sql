-- =====================================================================
-- Administration: column roles, hierarchies, policies (deid_admin).
-- Public functions are generated SECURITY INVOKER wrappers (#@WRAP, extension/build_sql.py).
-- What reads a caller's relation runs as the caller (SECURITY INVOKER); what writes the
-- catalog runs as deid_owner (SECURITY DEFINER, told the caller, which it checks against
-- session_user: access.caller_role).
-- =====================================================================

-- set_role: the hierarchy check reads the column as the caller, then the definer stores.
CREATE FUNCTION deid._set_role(relid oid, column_name name, role text, hierarchy text, source text)
RETURNS text LANGUAGE plpython3u SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('admin.set_role', relid, column_name, role, hierarchy, source)
$$;
CREATE FUNCTION deid._store_role(relid oid, column_name name, role text, hierarchy text, source text,
                                 caller name)
RETURNS text LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('admin.store_role', relid, column_name, role, hierarchy, source, caller)
$$;
#@WRAP deid.set_role(relation regclass, "column" name, role text, hierarchy text DEFAULT NULL, source text DEFAULT NULL) RETURNS text => deid._set_role(relation::oid, "column", role, hierarchy, source)
COMMENT ON FUNCTION deid.set_role(regclass, name, text, text, text) IS
  'Classify a column: identifier | quasi_identifier | sensitive | insensitive, with an optional hierarchy and source system. See deid.usage(''set_role'').';

-- unset_role / clear_roles: remove a column's role, or every role of a relation.
CREATE FUNCTION deid._unset_role(relid oid, column_name name, caller name)
RETURNS text LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('admin.unset_role', relid, column_name, caller)
$$;
#@WRAP deid.unset_role(relation regclass, "column" name) RETURNS text => deid._unset_role(relation::oid, "column", current_user)
COMMENT ON FUNCTION deid.unset_role(regclass, name) IS
  'Remove the role of a column (it is then unclassified). See deid.usage(''unset_role'').';

CREATE FUNCTION deid._clear_roles(relid oid, caller name)
RETURNS text LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('admin.clear_roles', relid, caller)
$$;
#@WRAP deid.clear_roles(relation regclass) RETURNS text => deid._clear_roles(relation::oid, current_user)
COMMENT ON FUNCTION deid.clear_roles(regclass) IS
  'Remove every column role of a relation. See deid.usage(''clear_roles'').';

CREATE FUNCTION deid._load_hierarchy(name text, rows text, info_loss float8[], caller name)
RETURNS text LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('admin.load_hierarchy', name, rows, info_loss, caller)
$$;
#@WRAP deid.load_hierarchy(name text, rows text, info_loss float8[] DEFAULT NULL) RETURNS text => deid._load_hierarchy(name, rows, info_loss, current_user)
COMMENT ON FUNCTION deid.load_hierarchy(text, text, float8[]) IS
  'Load a member hierarchy from ARX-style rows value;level1;...;* and its per-level information loss. See deid.usage(''load_hierarchy'').';

CREATE FUNCTION deid._interval_hierarchy(name text, low numeric, high numeric, widths numeric[], info_loss float8[], caller name)
RETURNS text LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('admin.interval_hierarchy', name, low, high, widths, info_loss, caller)
$$;
#@WRAP deid.interval_hierarchy(name text, low numeric, high numeric, widths int[], info_loss float8[] DEFAULT NULL) RETURNS text => deid._interval_hierarchy(name, low, high, widths::numeric[], info_loss, current_user)
COMMENT ON FUNCTION deid.interval_hierarchy(text, numeric, numeric, int[], float8[]) IS
  'Build a hierarchy of numeric bands [low, high): widths {5,10,20} give 5-, 10-, 20-wide bands, then *. See deid.usage(''interval_hierarchy'').';

-- the hierarchies shipped with deid (python_udfs/deid/catalog/standard): ICD-10-CM and
-- ICD-9-CM (code -> category -> block -> chapter), dates, age bands
CREATE FUNCTION deid._load_standard_hierarchy(kind text, name text, dots boolean, caller name)
RETURNS text LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('admin.load_standard_hierarchy', kind, name, dots, caller)
$$;
#@WRAP deid.load_standard_hierarchy(kind text, name text, dots boolean DEFAULT true) RETURNS text => deid._load_standard_hierarchy(kind, name, dots, current_user)
COMMENT ON FUNCTION deid.load_standard_hierarchy(text, text, boolean) IS
  'Load a hierarchy shipped with deid: ''icd10cm'' or ''icd9cm'', code -> category -> block -> chapter; dots => false for codes written without their dot. See deid.usage(''load_standard_hierarchy'').';

CREATE FUNCTION deid._date_hierarchy(name text, first_day text, last_day text, caller name)
RETURNS text LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('admin.date_hierarchy', name, first_day, last_day, caller)
$$;
#@WRAP deid.date_hierarchy(name text, first_day date, last_day date) RETURNS text => deid._date_hierarchy(name, to_char(first_day, 'YYYY-MM-DD'), to_char(last_day, 'YYYY-MM-DD'), current_user)
COMMENT ON FUNCTION deid.date_hierarchy(text, date, date) IS
  'Build a hierarchy of the days from first_day to last_day: day -> month -> quarter -> year -> *. See deid.usage(''date_hierarchy'').';

CREATE FUNCTION deid._age_hierarchy(name text, max_age int, caller name)
RETURNS text LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('admin.age_hierarchy', name, max_age, caller)
$$;
#@WRAP deid.age_hierarchy(name text, max_age int) RETURNS text => deid._age_hierarchy(name, max_age, current_user)
COMMENT ON FUNCTION deid.age_hierarchy(text, int) IS
  'Build a hierarchy of ages 0 .. max_age in bands of 1, 5, 10 and 20 years, then *. See deid.usage(''age_hierarchy'').';

CREATE FUNCTION deid._drop_hierarchy(name text, caller name)
RETURNS text LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('admin.drop_hierarchy', name, caller)
$$;
#@WRAP deid.drop_hierarchy(name text) RETURNS text => deid._drop_hierarchy(name, current_user)

CREATE FUNCTION deid._allow_requests(grantee name, relid oid, min_k int, min_l int,
                                     per_source_k boolean, caller name)
RETURNS text LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('admin.allow_requests', grantee, relid, min_k, min_l, per_source_k, caller)
$$;
#@WRAP deid.allow_requests(role name, relation regclass, min_k int, min_l int DEFAULT NULL, per_source_k boolean DEFAULT false) RETURNS text => deid._allow_requests(role, relation::oid, min_k, min_l, coalesce(per_source_k, false), current_user)
COMMENT ON FUNCTION deid.allow_requests(name, regclass, int, int, boolean) IS
  'Let a role request releases of a relation it cannot read, with k >= min_k (and l >= min_l); only an owner of the relation grants, and the source is then read as the granting role. See deid.usage(''allow_requests'').';

-- revoke_requests: remove a policy (its grantor, an owner of the relation, or a deid_admin).
CREATE FUNCTION deid._revoke_requests(grantee name, relid oid, caller name)
RETURNS text LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('admin.revoke_requests', grantee, relid, caller)
$$;
#@WRAP deid.revoke_requests(role name, relation regclass) RETURNS text => deid._revoke_requests(role, relation::oid, current_user)
COMMENT ON FUNCTION deid.revoke_requests(name, regclass) IS
  'Remove the policy that lets a role request releases of a relation. See deid.usage(''revoke_requests'').';

-- Audiences and source histories of the composition rule (python_udfs/deid/log/grants.py):
-- a deid_admin's only; each change is a row of deid.release_audience / deid.composition_reset.
CREATE FUNCTION deid._grant_release(release text, grantee name, caller name)
RETURNS text LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('log.grants.grant_release', release, grantee, caller)
$$;
#@WRAP deid.grant_release(release text, role name) RETURNS text => deid._grant_release(release, role, current_user)
COMMENT ON FUNCTION deid.grant_release(text, name) IS
  'Let a role read a release (GRANT SELECT on its views); refused when the role''s members would then read releases of the same source that single out fewer than k rows together. deid_admin only.';

CREATE FUNCTION deid._revoke_release(release text, grantee name, caller name)
RETURNS text LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('log.grants.revoke_release', release, grantee, caller)
$$;
#@WRAP deid.revoke_release(release text, role name) RETURNS text => deid._revoke_release(release, role, current_user)
COMMENT ON FUNCTION deid.revoke_release(text, name) IS
  'Take a release from a role (REVOKE SELECT); the role stays in the audience the composition rule compares. deid_admin only.';

CREATE FUNCTION deid._clear_source_history(source text, caller name)
RETURNS text LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('log.grants.clear_source_history', source, caller)
$$;
#@WRAP deid.clear_source_history(source text) RETURNS text => deid._clear_source_history(source, current_user)
COMMENT ON FUNCTION deid.clear_source_history(text) IS
  'Forget the earlier releases of a source (by schema.table, also once dropped) for the composition rule: a re-created table that holds other rows. Logged in deid.composition_reset. deid_admin only.';
