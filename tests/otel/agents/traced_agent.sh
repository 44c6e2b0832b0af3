#!/usr/bin/env bash
# An agent whose every kind of event carries the key prepare left and a text marker, so a trace
# can be searched for both: a tool call, a command, a message, usage.
s=$(cat .prepared-secret)
echo '{"_tag":"Started","sessionId":"traced-session","model":"claude-test"}'
echo '{"_tag":"ToolCall","callId":"call-7","name":"lookup","input":"ARGUMENT-TEXT '"$s"'","output":"RESULT-TEXT '"$s"'","status":"completed"}'
echo '{"_tag":"Command","command":"grep -r ARGUMENT-TEXT '"$s"' .","exitCode":1,"output":"OUTPUT-TEXT '"$s"'"}'
echo '{"_tag":"ToolCall","callId":"call-8","name":"write_file","input":"{}","output":null,"error":"disk full","status":"failed"}'
echo '{"_tag":"Usage","inputTokens":120,"outputTokens":30}'
echo '{"_tag":"Message","text":"ANSWER-TEXT the key is '"$s"' and sk-live1234567890abcdefghij"}'
echo '{"_tag":"Finished","reason":"done"}'
