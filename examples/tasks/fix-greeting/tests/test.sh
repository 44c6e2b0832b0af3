#!/bin/bash
# Two named rewards, each a check of its own in the grid, and one CTRF result per test.
cd /app
named=0; default=0
[ "$(python3 greet.py Ada 2>&1)" = "Hello, Ada!" ] && named=1
[ "$(python3 greet.py 2>&1)" = "Hello, world!" ] && default=1
outcome() { [ "$1" = 1 ] && echo passed || echo failed; }
printf '{"greets_by_name": %s, "default_kept": %s}\n' "$named" "$default" > /logs/verifier/reward.json
cat > /logs/verifier/ctrf.json <<JSON
{"results": {"tool": {"name": "test.sh"}, "tests": [
  {"name": "greets Ada by name", "status": "$(outcome $named)",
   "message": "python3 greet.py Ada printed: $(python3 greet.py Ada 2>&1 | head -c 80)"},
  {"name": "greets the world by default", "status": "$(outcome $default)"}
]}}
JSON
