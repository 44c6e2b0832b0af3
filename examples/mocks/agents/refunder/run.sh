#!/usr/bin/env bash
# The right agent for refunds.eval.py: looks the order up, then refunds its total, through the
# billing API whose base URL the trial gives in $BILLING_URL.
set -euo pipefail
echo '{"_tag":"Started","sessionId":"refunder-1"}'
order=$(grep -o '[0-9]\+' <<<"$SPHYNX_PROMPT" | head -1)
python3 - "$order" <<'PY'
import json, os, sys, urllib.request

base, order = os.environ["BILLING_URL"], sys.argv[1]
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
found = json.load(opener.open(f"{base}/orders/{order}"))
body = json.dumps({"order_id": found["id"], "amount": found["total"]}).encode()
request = urllib.request.Request(
    f"{base}/refunds", data=body, headers={"Content-Type": "application/json", "Authorization": "Bearer sk-demo-refunds-key"}
)
refund = json.load(opener.open(request))
text = f"Refunded order {order}: {found['total']} (refund {refund['id']})."
print(json.dumps({"_tag": "Message", "role": "assistant", "text": text}))
PY
echo '{"_tag":"Finished","reason":"done"}'
