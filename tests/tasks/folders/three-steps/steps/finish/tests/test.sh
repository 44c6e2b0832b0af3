#!/bin/bash
. /tests/common.sh
[ "$(cat /app/src/done.txt 2>/dev/null)" = done ] && [ -f /app/src/value.txt ] && reward 1 || reward 0
