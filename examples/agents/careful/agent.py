"""A scripted "agent" written with Proctor's runner kit: it reads the task, edits the workspace
correctly, and reports what it did. Stands in for a real coding agent in the examples."""

import json
import re
import subprocess
from pathlib import Path

from proctor.runner import create_emitter, env

FIXES = {
    # task keyword -> (file, regex of the broken code, the fix)
    "add": ("calc.py", r"def add\(a, b\):\n    return .*", "def add(a, b):\n    return a + b"),
    "divide": (
        "calc.py",
        r"def divide\(a, b\):\n    return .*",
        'def divide(a, b):\n    if b == 0:\n        raise ZeroDivisionError("divide by zero")\n    return a / b',
    ),
    "greet": (
        "greeter.py",
        r"def greet\(name\):\n    return .*",
        'def greet(name):\n    return f"Hello, {name}!"',
    ),
}


def main() -> None:
    run = env()
    emit = create_emitter()
    emit.started(session_id=f"careful-{abs(hash(run.prompt)) % 10_000}", model=run.model)
    emit.message("Reading the task and the code first.")
    for keyword, (name, broken, fixed) in FIXES.items():
        if keyword not in run.prompt.lower():
            continue
        path = Path(run.workspace, name)
        source = path.read_text()
        emit.tool_call(
            "read_file",
            {"path": name},
            output=source,
            status="completed",
            call_id=f"read-{keyword}",
        )
        path.write_text(re.sub(broken, fixed, source))
        emit.file_change([str(path)])
        check = subprocess.run(
            ["python3", "-c", f"import {path.stem}"],
            cwd=run.workspace,
            capture_output=True,
            text=True,
        )
        emit.command(
            f"python3 -c 'import {path.stem}'", check.returncode, check.stdout + check.stderr
        )
    emit.usage(input_tokens=1200 + len(run.prompt), output_tokens=180)
    emit.message(f"Done: {json.dumps(run.prompt)} is handled and the module imports cleanly.")
    emit.finished("done")


if __name__ == "__main__":
    main()
