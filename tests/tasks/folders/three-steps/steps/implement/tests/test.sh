#!/bin/bash
. /tests/common.sh
[ "$(cat /app/src/value.txt 2>/dev/null)" = "$WANT" ] && reward 1 || reward 0
