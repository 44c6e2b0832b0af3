"""The command placed first on the agent's PATH for a ``mock.cli`` (standalone: stdlib only,
copied into the trial's mock folder with its name and server address filled in).

It reports the run (argv, stdin, cwd, the environment's names) to the trial's mock server and
prints what the server answers. Never imported by Proctor itself."""

import json
import os
import select
import sys
import urllib.request

NAME = "{name}"
URL = "{url}"
# Input piped in arrives at once; a stdin left open with nothing coming must not hang the run.
STDIN_WAIT_S = 0.2


def read_stdin():
    try:
        if sys.stdin is None or sys.stdin.isatty():
            return ""
        ready, _, _ = select.select([sys.stdin], [], [], STDIN_WAIT_S)
        return sys.stdin.read() if ready else ""
    except (OSError, ValueError):
        return ""


def main():
    call = {
        "argv": [NAME, *sys.argv[1:]],
        "stdin": read_stdin(),
        "cwd": os.getcwd(),
        "env_names": sorted(os.environ),
    }
    request = urllib.request.Request(
        URL, data=json.dumps(call).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        # Straight to loopback, whatever proxy the environment names.
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(request, timeout=600) as response:
            answer = json.loads(response.read() or b"{}")
    except Exception as exc:
        sys.stderr.write(f"{NAME} (mock): the trial's mock server did not answer ({exc})\n")
        return 1
    sys.stdout.write(answer.get("stdout", ""))
    sys.stderr.write(answer.get("stderr", ""))
    return int(answer.get("exit", 0))


if __name__ == "__main__":
    sys.exit(main())
