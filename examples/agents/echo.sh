#!/usr/bin/env bash
# A runner in plain bash: it only echoes protocol lines. Any language that can print JSON works.
echo '{"_tag":"Started","sessionId":"bash-1","model":"'"$SPHYNX_MODEL"'"}'
echo "ordinary log lines are ignored as events"
printf 'TODO: %s\n' "$SPHYNX_PROMPT" > NOTES.md
echo '{"_tag":"FileChange","paths":["'"$SPHYNX_WORKSPACE"'/NOTES.md"]}'
echo '{"_tag":"Message","role":"assistant","text":"I wrote the task down in NOTES.md."}'
echo '{"_tag":"Usage","inputTokens":120,"outputTokens":12}'
echo '{"_tag":"Finished","reason":"done"}'
