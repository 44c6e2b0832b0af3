#!/usr/bin/env bash
# Writes what the harness handed it to facts.txt (key=value per line) for a validator to report.
facts="$SPHYNX_WORKSPACE/facts.txt"
{
  echo "prompt=$SPHYNX_PROMPT"
  echo "model=$SPHYNX_MODEL"
  echo "home=$SPHYNX_HOME"
  echo "HOME=$HOME"
  echo "workspace=$SPHYNX_WORKSPACE"
  echo "cwd=$PWD"
  echo "trace_log=$SPHYNX_TRACE_LOG"
  if [ "${SPHYNX_SYSTEM_PROMPT_FILE+set}" = set ]; then
    echo "system_prompt_file=$SPHYNX_SYSTEM_PROMPT_FILE"
    echo "system_prompt=$(cat "$SPHYNX_SYSTEM_PROMPT_FILE")"
  else
    echo "system_prompt_file=<unset>"
  fi
  echo "greeting=${GREETING-<unset>}"
  if IFS= read -r line; then echo "stdin=$line"; else echo "stdin=<closed>"; fi
  echo "installs_in_this_home=$(cat "$HOME/installed" 2>/dev/null | wc -l)"
  ls > /dev/null
  if [ -s "$SPHYNX_TRACE_LOG" ]; then echo "trace_log_written=yes"; else echo "trace_log_written=no"; fi
} > "$facts"
echo '{"_tag":"Message","text":"reported"}'
echo '{"_tag":"Finished","reason":"done"}'
