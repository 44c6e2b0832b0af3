#!/bin/bash
# The secret word: marmalade
if [ "$(cat /app/answer.txt 2>/dev/null)" = "marmalade" ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
