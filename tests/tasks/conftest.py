# The task folders' own tests run inside their containers, never under this pytest.
collect_ignore_glob = ["folders/*", "broken/*"]
