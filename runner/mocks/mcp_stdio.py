"""An MCP server on stdio for CLIs that launch their servers (standalone: stdlib only, copied
into the trial's mock folder; never imported by Proctor itself).

    python3 mcp_stdio.py URL

Each JSON-RPC message read from stdin is posted to the trial's MCP mock at URL (stateless
streamable HTTP with JSON answers) and the answer, if any, written to stdout as one line.
"""

import json
import sys
import urllib.error
import urllib.request

HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def post(opener, url, line):
    request = urllib.request.Request(url, data=line.encode(), headers=HEADERS)
    try:
        with opener.open(request, timeout=600) as response:
            return response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.read().decode()


def main(url):
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            message = json.loads(line)
        except json.JSONDecodeError:
            continue
        try:
            answer = post(opener, url, line)
        except Exception as exc:
            if isinstance(message, dict) and "id" in message:
                error = {"code": -32603, "message": f"mock server unreachable: {exc}"}
                answer = json.dumps({"jsonrpc": "2.0", "id": message["id"], "error": error})
            else:
                answer = ""
        answer = answer.strip()
        if answer and "id" in message:
            sys.stdout.write(answer.replace("\n", " ") + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1])
