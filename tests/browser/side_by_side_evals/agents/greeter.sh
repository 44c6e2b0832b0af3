#!/usr/bin/env bash
# A scripted agent speaking the command harness protocol. Both modes read the task the same
# way for eight steps; then `careful` writes the right greeting and checks it, while `hasty`
# guesses one and leaves a note. The side-by-side test expects them to part at step nine.
mode="$1"
echo '{"_tag":"Started","sessionId":"'"$mode"'-1","model":"'"$SPHYNX_MODEL"'"}'
for step in 1 2 3 4 5 6 7 8; do
  echo '{"_tag":"Message","role":"assistant","text":"Reading the task, part '"$step"' of 8."}'
done
if [ "$mode" = careful ]; then
  printf 'Hello, Ada!\n' > greeting.txt
  echo '{"_tag":"Command","command":"cat greeting.txt","exitCode":0,"output":"Hello, Ada!"}'
  echo '{"_tag":"FileChange","paths":["greeting.txt"]}'
else
  echo '{"_tag":"Message","role":"assistant","text":"I will guess the greeting."}'
  printf 'hello ada\n' > greeting.txt
  printf 'guessed\n' > notes.txt
  echo '{"_tag":"FileChange","paths":["greeting.txt","notes.txt"]}'
fi
echo '{"_tag":"Usage","inputTokens":420,"outputTokens":37}'
echo '{"_tag":"Message","role":"assistant","text":"Done: greeting.txt holds the greeting."}'
echo '{"_tag":"Finished","reason":"done"}'
