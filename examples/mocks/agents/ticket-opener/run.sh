#!/usr/bin/env bash
# The right agent for tickets.eval.py: opens the ticket through the MCP server the trial gives in
# $TICKETS_URL (streamable HTTP: initialize, then tools/call).
set -euo pipefail
echo '{"_tag":"Started","sessionId":"ticket-opener-1"}'
python3 - <<'PY'
import json, os, urllib.request

url = os.environ["TICKETS_URL"]
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def rpc(method, params, id):
    message = {"jsonrpc": "2.0", "id": id, "method": method, "params": params}
    request = urllib.request.Request(url, data=json.dumps(message).encode(), headers=headers)
    return json.load(opener.open(request))


rpc("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "opener", "version": "1"}}, 1)
answer = rpc("tools/call", {"name": "create_ticket", "arguments": {"title": "Printer on floor 3 is jammed", "priority": "high"}}, 2)
text = "Opened ticket: " + answer["result"]["content"][0]["text"]
print(json.dumps({"_tag": "Message", "role": "assistant", "text": text}))
PY
echo '{"_tag":"Finished","reason":"done"}'
