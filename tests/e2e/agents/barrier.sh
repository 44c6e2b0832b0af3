#!/usr/bin/env bash
# Signs in at $BARRIER_DIR and waits (up to $BARRIER_WAIT_S) for a second trial to sign in:
# two trials only meet when they run at the same time.
touch "$BARRIER_DIR/$$-$RANDOM"
deadline=$(( $(date +%s) + BARRIER_WAIT_S ))
while :; do
  seen=$(ls "$BARRIER_DIR" | wc -l)
  if [ "$seen" -ge 2 ] || [ "$(date +%s)" -ge "$deadline" ]; then break; fi
  sleep 0.05
done
echo "{\"_tag\":\"Message\",\"text\":\"met $seen\"}"
echo '{"_tag":"Finished","reason":"done"}'
