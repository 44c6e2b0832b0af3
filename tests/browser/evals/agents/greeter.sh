#!/usr/bin/env bash
# A scripted agent speaking the command harness protocol: `steady` writes the right greeting,
# `sloppy` a wrong one. Its message carries HTML that the dashboard must show as text.
mode="$1"
echo '{"_tag":"Started","sessionId":"'"$mode"'-1","model":"'"$SPHYNX_MODEL"'"}'
sleep 2
echo '{"_tag":"Message","role":"assistant","text":"Writing the greeting now. <img src=x onerror=alert(1)>"}'
if [ "$mode" = steady ]; then greeting='Hello, Ada!'; else greeting='hello ada'; fi
printf '%s\n' "$greeting" > greeting.txt
echo '{"_tag":"Command","command":"cat greeting.txt","exitCode":0,"output":"'"$greeting"'"}'
echo '{"_tag":"FileChange","paths":["greeting.txt"]}'
echo '{"_tag":"Usage","inputTokens":420,"outputTokens":37}'
echo '{"_tag":"Message","role":"assistant","text":"Done: greeting.txt holds the greeting."}'
echo '{"_tag":"Finished","reason":"done"}'
