#!/usr/bin/env bash
# A runner written for the original protocol: nothing but echo. It must run unchanged.
echo '{"_tag":"Started","sessionId":"run-42","model":"openai/gpt-5.5"}'
echo '{"_tag":"Message","role":"assistant","text":"Reading the failing test first."}'
echo '{"_tag":"Command","command":"bun test","exitCode":1,"output":"expect(5).toBe(6)\n"}'
echo 'export const total = 6;' > total.ts
echo '{"_tag":"FileChange","paths":["'"$SPHYNX_WORKSPACE"'/total.ts"]}'
echo '{"_tag":"ToolCall","callId":"call_7","name":"search","input":"{\"query\":\"total\"}","status":"completed"}'
echo '{"_tag":"Usage","inputTokens":9120,"outputTokens":312,"cacheReadTokens":8000}'
echo '{"_tag":"Message","role":"assistant","text":"Fixed the total."}'
echo '{"_tag":"Finished","reason":"done","at":1788300005000}'
