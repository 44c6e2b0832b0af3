#!/bin/bash
. /tests/common.sh
[ -d /app/src ] && [ -f /app/README.txt ] && [ -f /app/setup-marker.txt ] && [ ! -e /app/setup.sh ] && reward 1 || reward 0
