#!/usr/bin/env bash
# Known tags with wrong fields, and lines that are not events at all.
echo 'plain logging, not an event'
echo '{"note":"json without a tag"}'
echo '{"_tag":"Unknown","x":1}'
echo '{"_tag":"Usage","inputTokens":-1,"outputTokens":2}'
echo '{"_tag":"Message","role":"assistant"}'
echo '{"_tag":"ToolCall","name":"search","input":"{}"}'
echo '{"_tag":"Message","role":"assistant","text":"still answering"}'
echo '{"_tag":"Finished","reason":"done"}'
