"""deid's catalog: relations and their column roles, hierarchies."""
