-- =====================================================================
-- The pre-store phase of a sharded request (python_udfs/deid/distributed/eligibility.py,
-- docs/sharding.md): the coordinator's deid._dist_eligible (PL/Proxy, RUN ON ALL, as the
-- caller; installed with the other proxies by deid._install_proxies) runs, on every node, the
-- single-node request's begin with the method's narrowed read and the method's own refusal,
-- storing nothing; a node that cannot satisfy the privacy model refuses the whole request
-- before any node stores a part.
-- =====================================================================

-- Node, as the caller (SECURITY INVOKER): begin, read (with SELECT: as the caller), check.
CREATE FUNCTION deid._dist_node_eligible(source text, request jsonb)
RETURNS text LANGUAGE plpython3u SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('distributed.eligibility.node_check', source, request)
$$;
-- The single-node request's begin (its access and code checks, as _request_begin's) with the
-- method's narrowed read; a policy's grantor reads it here.
CREATE FUNCTION deid._dist_eligibility_begin(request jsonb, caller name)
RETURNS text LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('distributed.eligibility.begin', request, caller)
$$;
-- The method's refusal and the overlap control's on what begin read; stores nothing.
CREATE FUNCTION deid._dist_eligibility_check(token text, caller name)
RETURNS text LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#@BOOT
return entry('distributed.eligibility.check', token, caller)
$$;
