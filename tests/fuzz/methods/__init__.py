"""Each method's part of the fuzz generator (tests/fuzz/generator.py): the columns, k, l and
options a user would plausibly pass for that method over the fuzz tables (tables.py), and how
its requests vary their source. One module per method, named as the method; generator.py finds
them and names no method."""
