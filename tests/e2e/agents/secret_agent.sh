#!/usr/bin/env bash
# Finds the key prepare left in the workspace and repeats it everywhere it can.
s=$(cat .prepared-secret)
echo '{"_tag":"Started","sessionId":"secret-session"}'
echo "plain log line: $s"
echo "stderr line: $s" >&2
echo '{"_tag":"Command","command":"cat .prepared-secret","exitCode":0,"output":"'"$s"'"}'
echo '{"_tag":"ToolCall","callId":null,"name":"lookup","input":"'"$s"'","output":"'"$s"'","status":null}'
cp .prepared-secret leaked.txt
echo '{"_tag":"FileChange","paths":["'"$SPHYNX_WORKSPACE"'/leaked.txt"]}'
echo '{"_tag":"Message","text":"the key is '"$s"'"}'
echo '{"_tag":"Finished","reason":"done with '"$s"'"}'
