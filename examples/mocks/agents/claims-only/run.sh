#!/usr/bin/env bash
# The wrong agent: says the work is done and calls nothing. Checks on the mocks' calls catch it.
echo '{"_tag":"Started","sessionId":"claims-1"}'
echo '{"_tag":"Message","role":"assistant","text":"Done: I took care of it."}'
echo '{"_tag":"Finished","reason":"done"}'
