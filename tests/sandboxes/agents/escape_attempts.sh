#!/usr/bin/env bash
# An agent that tries to leave its sandbox: it writes to /etc and calls a server on the host's
# loopback ($HOST_PORT), and reports each attempt as a Command event with its real exit code.
report() {  # report COMMAND EXIT_CODE OUTPUT
  python3 -c 'import json, sys; print(json.dumps({"_tag": "Command", "command": sys.argv[1], "exitCode": int(sys.argv[2]), "output": sys.argv[3]}))' "$@"
}
echo '{"_tag":"Started","sessionId":"escape-1","model":"none"}'
output=$( { echo x > /etc/proctor-test; } 2>&1 ); report "echo x > /etc/proctor-test" $? "$output"
output=$( { exec 3<>"/dev/tcp/127.0.0.1/$HOST_PORT" && head -n1 <&3; } 2>&1 ); report "call 127.0.0.1:$HOST_PORT" $? "$output"
echo '{"_tag":"Message","role":"assistant","text":"Tried both."}'
echo '{"_tag":"Finished","reason":"done"}'
