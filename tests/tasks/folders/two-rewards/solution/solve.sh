#!/bin/bash
printf '%s' "$GREETING" > greeting.txt
echo "solved" > /logs/agent/oracle.log
