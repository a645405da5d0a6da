"""Log: the release's catalog rows, views and its line in deid.release."""
