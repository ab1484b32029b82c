#!/usr/bin/env bash
# scripts/phase.sh NAME COMMAND...: run COMMAND as phase NAME of `make test`, then print how long it
# took and whether it passed (and append that line to $PHASES_FILE, which `make test` prints at the end).
name=$1
shift
start=${EPOCHREALTIME/./}
echo "==> phase $name: $*"
"$@"
rc=$?
us=$((${EPOCHREALTIME/./} - start))
line=$(printf '%-14s %5d.%d s  %s' "$name" $((us / 1000000)) $((us / 100000 % 10)) "$([ $rc = 0 ] && echo ok || echo "FAILED (exit $rc)")")
echo "==> phase $line"
if [ -n "${PHASES_FILE:-}" ]; then echo "$line" >>"$PHASES_FILE"; fi
exit $rc
