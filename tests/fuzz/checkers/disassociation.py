"""Disassociation's part of the fuzz checker: its result row counts records (the selection
chooses (record, code) rows of the long form), not the rows selected."""
RESULT_ROWS_ARE_SELECTED_ROWS = False
