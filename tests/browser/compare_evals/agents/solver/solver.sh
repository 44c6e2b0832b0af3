#!/usr/bin/env bash
# A scripted agent speaking the command harness protocol: it answers each task of the
# arithmetic evals. The browser test rewrites SUM to break the first case.
SUM=4
echo '{"_tag":"Started","sessionId":"solver-1","model":"'"$SPHYNX_MODEL"'"}'
case "$SPHYNX_PROMPT" in
  *"2 + 2"*) answer="$SUM"; note="added on a zeppelin abacus" ;;
  *hello*) answer=hello; note="a greeting" ;;
  *) answer=3; note="counted" ;;
esac
printf '%s\n' "$answer" > answer.txt
echo '{"_tag":"FileChange","paths":["answer.txt"]}'
echo '{"_tag":"Usage","inputTokens":100,"outputTokens":10}'
echo '{"_tag":"Message","role":"assistant","text":"Wrote '"$answer"' ('"$note"')."}'
echo '{"_tag":"Finished","reason":"done"}'
