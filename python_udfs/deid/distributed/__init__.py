"""Releases over the nodes of a sharded source (PL/Proxy): the per-method steps that run
on the nodes and on the coordinator."""
