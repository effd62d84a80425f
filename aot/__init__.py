"""Old name of the `emlkit` package, kept for one release so `python -m aot` still works; import `emlkit`."""
