#!/bin/bash
printf '%s' "$GREETING" > greeting.txt
