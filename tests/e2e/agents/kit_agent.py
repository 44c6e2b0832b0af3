"""An agent written with the runner kit: adds the route the prompt asks for to app/routes.py."""

import re
import subprocess

from proctor.runner import create_emitter, env

case = env()
emit = create_emitter()
emit.started("kit-run", model=case.model or None)

listing = subprocess.run(["git", "ls-files"], cwd=case.workspace, capture_output=True, text=True)
emit.command("git ls-files", listing.returncode, listing.stdout)
emit.tool_call(
    "search",
    {"query": "routes"},
    output=[name for name in listing.stdout.split() if "route" in name],
)

route = re.search(r"(/[a-z]+) route", case.prompt)
path = f"{case.workspace}/app/routes.py"
if route:
    with open(path, "a", encoding="utf-8") as routes:
        routes.write(f'ROUTES["{route.group(1)}"] = 200\n')
    emit.file_change(path)
    emit.message(
        f"Added the {route.group(1)} route.", usage={"input_tokens": 900, "output_tokens": 40}
    )
else:
    emit.message("I could not tell which route you want.")
emit.usage(input_tokens=900, output_tokens=40)
emit.finished("done")
emit.finished("printed once")
