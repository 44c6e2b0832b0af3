# Sourced into every non-interactive bash the agent starts (through BASH_ENV). Its DEBUG trap
# appends each command about to run to $SPHYNX_TRACE_LOG as "<epoch seconds>\t<command>\0"
# (NUL-terminated, since a command may span lines). Exit codes are unknowable here: the trap
# fires before the command runs.
if [ -n "${SPHYNX_TRACE_LOG:-}" ]; then
  trap 'printf "%s\t%s\0" "${EPOCHREALTIME:-0}" "$BASH_COMMAND" >> "$SPHYNX_TRACE_LOG" 2>/dev/null' DEBUG
fi
