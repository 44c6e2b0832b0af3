#!/usr/bin/env bash
# Runs shell commands the recorder sees; reports one of them itself.
touch made.txt
echo '{"_tag":"Command","command":"touch made.txt","exitCode":0,"output":""}'
ls > /dev/null
bash -c 'mkdir -p nested && echo inner > nested/file.txt'
echo '{"_tag":"Finished","reason":"done"}'
