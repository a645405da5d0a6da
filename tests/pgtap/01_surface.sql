-- pgTAP: the SQL surface of deid (run by pg_prove in make test).
BEGIN;
SELECT plan(83);

SELECT has_extension('deid');
SELECT has_schema('deid');
SELECT has_schema('release');
SELECT has_role('deid_admin');
SELECT has_role('deid_reader');

SELECT has_table('deid', 'column_role', 'column roles table');
SELECT has_table('deid', 'hierarchy', 'hierarchy table');
SELECT has_table('deid', 'hierarchy_level', 'dimension hierarchy table');
SELECT has_table('deid', 'hierarchy_member', 'member hierarchy table');
SELECT has_table('deid', 'policy', 'policy table');
SELECT has_table('deid', 'release', 'release log');
SELECT has_table('deid', 'rid_set', 'RID sets (001 Theorem 3)');
SELECT has_table('deid', 'equivalence_class', 'equivalence classes (002)');
SELECT has_view('deid', 'roles', 'roles can be read back');
SELECT has_table('deid', 'request_lock', 'the rows whose locks serialize requests');
SELECT ok(NOT EXISTS (SELECT 1 FROM pg_class c,
                             aclexplode(coalesce(c.relacl, acldefault('r', c.relowner))) a
                       WHERE c.oid = 'deid.request_lock'::regclass AND a.grantee <> c.relowner),
          'no role but deid_owner holds a privilege on deid.request_lock');
SELECT has_table('deid', 'run_slot', 'the rows whose locks tell a running distributed coordinator');
SELECT ok(NOT EXISTS (SELECT 1 FROM pg_class c,
                             aclexplode(coalesce(c.relacl, acldefault('r', c.relowner))) a
                       WHERE c.oid = 'deid.run_slot'::regclass AND a.grantee <> c.relowner),
          'no role but deid_owner holds a privilege on deid.run_slot');
SELECT columns_are('deid', 'rid_set', ARRAY['release_id', 'attribute', 'chunk', 'group_ids', 'value_list', 'rid_counts', 'rids']);
SELECT col_type_is('deid', 'rid_set', 'group_ids', 'bytea', 'groups packed as big-endian int4');
SELECT col_type_is('deid', 'rid_set', 'rid_counts', 'bytea', 'RID-set sizes packed as big-endian int4');
SELECT col_type_is('deid', 'rid_set', 'rids', 'bytea', 'RIDs packed as big-endian int8');
SELECT has_view('deid', 'rid_sets', 'RID sets, one row per value');
SELECT has_function('deid', '_rid_set_entries', ARRAY['bytea', 'text[]', 'bytea', 'bytea'],
                    'the view decodes the packed chunks');
SELECT has_table('deid', 'cluster_member', 'cluster membership of condensation releases (004)');
SELECT columns_are('deid', 'cluster_member', ARRAY['release_id', 'cluster_id', 'rids']);

SELECT has_function('deid', 'set_role', ARRAY['regclass', 'name', 'text', 'text', 'text']);
SELECT has_function('deid', 'load_hierarchy', ARRAY['text', 'text', 'double precision[]']);
SELECT has_function('deid', 'interval_hierarchy', ARRAY['text', 'numeric', 'numeric', 'integer[]', 'double precision[]']);
SELECT has_function('deid', 'allow_requests', ARRAY['name', 'regclass', 'integer', 'integer', 'boolean']);
SELECT has_function('deid', 'k_anonymity', ARRAY['regclass', 'text[]']);
SELECT has_function('deid', 'equivalence_classes', ARRAY['regclass', 'text[]']);
SELECT has_function('deid', 'l_diversity', ARRAY['regclass', 'text[]', 'text[]', 'boolean']);

-- Implementations that read a caller's relation run as the caller (never with deid's rights); the definers
-- pin search_path and belong to deid_owner, a NOLOGIN role that is no superuser.
SELECT isnt_definer('deid', '_k_anonymity', ARRAY['oid', 'text[]']);
SELECT isnt_definer('deid', '_l_diversity', ARRAY['oid', 'text[]', 'text[]', 'boolean']);
SELECT isnt_definer('deid', '_equivalence_classes', ARRAY['oid', 'text[]']);
SELECT isnt_definer('deid', '_set_role', ARRAY['oid', 'name', 'text', 'text', 'text']);
SELECT has_role('deid_owner');
SELECT ok((SELECT NOT rolsuper AND NOT rolcanlogin AND NOT rolbypassrls FROM pg_roles
            WHERE rolname = 'deid_owner'), 'deid_owner: no login, no superuser, no BYPASSRLS');
SELECT is(
    (SELECT string_agg(p.proname || ':' || pg_get_userbyid(p.proowner), ',' ORDER BY p.proname)
       FROM pg_proc p
      WHERE p.pronamespace = 'deid'::regnamespace AND p.prosecdef
        AND pg_get_userbyid(p.proowner) <> 'deid_owner'
        AND p.proname !~ '^_reader_[0-9a-f]{16}$'),      -- a policy's reader: its grantor's
    '_copy_in:deid_loader,_install_reader:' || (SELECT pg_get_userbyid(extowner) FROM pg_extension
                                                  WHERE extname = 'deid'),
    'every SECURITY DEFINER belongs to deid_owner but the COPY helper, the reader installer and the readers');
SELECT is((SELECT count(*)::int FROM pg_class
            WHERE relnamespace = 'deid'::regnamespace AND relkind IN ('r', 'v')
              AND pg_get_userbyid(relowner) <> 'deid_owner'), 0, 'deid_owner owns the catalog');
SELECT ok(NOT has_function_privilege('deid_reader', 'deid._copy_in(regclass, text[], text)', 'EXECUTE'),
          'only deid_owner may call the COPY helper');
SELECT ok(NOT has_function_privilege('deid_admin', 'deid._install_reader(name)', 'EXECUTE'),
          'only deid_owner may install a grantor''s reader');
SELECT is(
    (SELECT count(*)::int FROM pg_proc
      WHERE pronamespace = 'deid'::regnamespace AND prosecdef
        AND NOT coalesce(proconfig @> ARRAY['search_path=pg_catalog, pg_temp'], false)),
    0, 'every SECURITY DEFINER function pins search_path');
SELECT is(
    (SELECT count(*)::int FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
      WHERE p.pronamespace = 'deid'::regnamespace AND p.prosecdef AND l.lanname = 'plpython3u'
        AND (has_function_privilege('deid_admin', p.oid, 'EXECUTE')
             OR has_function_privilege('deid_reader', p.oid, 'EXECUTE'))),
    0, 'a definer a role may call is PL/pgSQL (its errors read as PostgreSQL''s, without a traceback)');
SELECT is(
    (SELECT count(*)::int FROM pg_proc p
      WHERE p.pronamespace = 'deid'::regnamespace AND p.proname LIKE '%\_\_py'
        AND (has_function_privilege('deid_admin', p.oid, 'EXECUTE')
             OR has_function_privilege('deid_reader', p.oid, 'EXECUTE'))),
    0, 'the PL/Python body of a definer is for that definer only');
SELECT ok(NOT has_function_privilege('deid_reader', 'deid._datapath_probe(oid, text[], text, boolean)', 'EXECUTE'),
          'the data-path probe is superuser only');
SELECT ok(NOT has_function_privilege('deid_reader', 'deid._store_role(oid, name, text, text, text, name)', 'EXECUTE'),
          'readers cannot write column roles (set_role itself refuses them with a hint)');
SELECT ok(NOT has_table_privilege('deid_reader', 'deid.rid_set', 'SELECT'), 'readers never see RID sets');
SELECT ok(NOT has_table_privilege('deid_reader', 'deid.rid_sets', 'SELECT'), 'nor their per-value view');
SELECT ok(NOT has_table_privilege('deid_reader', 'deid.cluster_member', 'SELECT'), 'readers never see cluster membership');
SELECT ok(has_table_privilege('deid_admin', 'deid.cluster_member', 'SELECT'), 'admins audit cluster membership');

-- Errors carry a SQLSTATE.
CREATE TEMP TABLE t_pgtap (id int PRIMARY KEY, a int, s text);
INSERT INTO t_pgtap SELECT i, i % 4, 'v' || (i % 3) FROM generate_series(1, 40) i;
SELECT throws_ok($$SELECT deid.k_anonymity(NULL)$$, '22004');
SELECT throws_ok($$SELECT deid.k_anonymity('t_pgtap', '{nope}')$$, '42703');
SELECT is(deid.k_anonymity('t_pgtap', '{a}'), 10::bigint, 'k of a 4-class table of 40 rows');
SELECT is((SELECT sum(size)::int FROM deid.equivalence_classes('t_pgtap', '{a}')), 40, 'classes cover every row');


-- The front door.
SELECT has_function('deid', 'anonymize_request',
                    ARRAY['regclass', 'text', 'integer', 'integer', 'text[]', 'text', 'jsonb', 'text']);
SELECT has_function('deid', 'drop_release', ARRAY['text']);
SELECT isnt_definer('deid', '_anonymize_request', ARRAY['jsonb']);
-- the request's arguments as one jsonb, into one begin function
SELECT is_definer('deid', '_request_begin', ARRAY['jsonb', 'name']);
SELECT hasnt_function('deid', '_request_begin',
                      ARRAY['oid', 'text', 'integer', 'integer', 'text[]', 'text', 'text', 'text', 'name']);
-- who reads a release, and a source's history (the composition rule): deid_admin's only
SELECT has_function('deid', 'grant_release', ARRAY['text', 'name']);
SELECT has_function('deid', 'revoke_release', ARRAY['text', 'name']);
SELECT has_function('deid', 'clear_source_history', ARRAY['text']);
SELECT has_table('deid', 'release_identity', 'the source identity of each release');
SELECT has_table('deid', 'release_audience', 'the audience of each release');
SELECT has_table('deid', 'composition_state', 'the composition rule''s cells per source');
SELECT ok(NOT has_table_privilege('deid_admin', 'deid.composition_state', 'SELECT, UPDATE'),
          'the kept cells change only through deid''s requests');
SELECT ok(NOT has_table_privilege('deid_admin', 'deid.release_audience', 'INSERT'),
          'audiences change only through deid''s functions');
SELECT throws_ok($$SELECT deid.grant_release('pgtap_nope', 'deid_reader')$$, '42704');
SELECT has_table('deid', 'release_apart', 'releases of one source the rule never compared');
SELECT ok(NOT has_table_privilege('deid_admin', 'deid.release_apart', 'DELETE'),
          'pairs kept apart change only through deid''s functions');
SELECT is_definer('deid', '_release_readable', ARRAY['bigint']);
SELECT has_function('deid', 'drop_release', ARRAY['text', 'boolean']);
SELECT has_table('deid', 'distributed_forced_drop', 'the log of forced drops of distributed releases');
SELECT is_definer('deid', '_request_finish', ARRAY['text', 'name']);
-- the report's source-derived figures: read as the caller, never as deid_owner
SELECT has_function('deid', 'report_source', ARRAY['text']);
SELECT isnt_definer('deid', '_report_source', ARRAY['text']);
CREATE TABLE public.t_pgtap_src (id int PRIMARY KEY, a int, s text);
INSERT INTO t_pgtap_src SELECT i, i % 10, 'v' || (i % 4) FROM generate_series(1, 200) i;
SELECT deid.set_role('t_pgtap_src', 'a', 'quasi_identifier');
SELECT deid.set_role('t_pgtap_src', 's', 'sensitive');
SELECT throws_ok($$SELECT * FROM deid.anonymize_request('t_pgtap_src', 'anatomy', k => 1)$$, '22023');
SELECT throws_ok($$SELECT * FROM deid.anonymize_request('t_pgtap_src', 'magic', k => 5)$$, '22023');
SELECT throws_ok($$SELECT * FROM deid.anonymize_request('t_pgtap_src', 'anatomy', k => 5, l => 9)$$, '22023');
SELECT results_eq(
    $$SELECT relations, rows, verified FROM deid.anonymize_request('t_pgtap_src', 'anatomy', k => 20, l => 3,
          options => '{"seed": 1}', release => 'pgtap_rel')$$,
    $$VALUES ('{release.pgtap_rel_qit,release.pgtap_rel_s}'::text[], 200::bigint, true)$$,
    'an anatomy release of 200 rows');
SELECT ok((SELECT min(n) >= 20 FROM (SELECT count(*) n FROM release.pgtap_rel_qit GROUP BY group_id) g),
          'every group of the release has at least K rows');

SELECT * FROM finish();
ROLLBACK;
