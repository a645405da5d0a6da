"""Read: a relation's chosen columns as numpy arrays (the snapshot), in one pass."""
