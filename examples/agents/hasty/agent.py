"""A scripted "agent" that works fast and is often wrong: it fixes the easy case, sometimes
gets the hard one right by luck, and never checks its work. The grid shows the difference."""

import random
import re
from pathlib import Path

from proctor.runner import create_emitter, env


def main() -> None:
    run = env()
    emit = create_emitter()
    emit.started(session_id=f"hasty-{random.randrange(10_000)}", model=run.model)
    prompt = run.prompt.lower()
    if "add" in prompt:
        path = Path(run.workspace, "calc.py")
        path.write_text(
            re.sub(
                r"def add\(a, b\):\n    return .*",
                "def add(a, b):\n    return a + b",
                path.read_text(),
            )
        )
        emit.file_change([str(path)])
    if "divide" in prompt:
        path = Path(run.workspace, "calc.py")
        # Half the time it remembers the zero case; it never gets the message wrong otherwise.
        if random.random() < 0.5:
            body = "if b == 0:\n        raise ZeroDivisionError('divide by zero')\n    return a / b"
        else:
            body = "return a / b"
        path.write_text(
            re.sub(
                r"def divide\(a, b\):\n    return .*",
                f"def divide(a, b):\n    {body}",
                path.read_text(),
            )
        )
        emit.file_change([str(path)])
    if "greet" in prompt:
        path = Path(run.workspace, "greeter.py")
        path.write_text(
            re.sub(
                r"def greet\(name\):\n    return .*",
                "def greet(name):\n    return 'Hello ' + name",
                path.read_text(),
            )
        )
        emit.file_change([str(path)])
    emit.usage(input_tokens=300 + len(run.prompt), output_tokens=40)
    emit.message("Fixed it.")
    emit.finished("done")


if __name__ == "__main__":
    main()
