#!/usr/bin/env bash
# Runs a command and passes only if it exits 0 and its output (stdout and stderr) matches a regex:
# CTest's PASS_REGULAR_EXPRESSION alone ignores the exit code, so a crash after the matching line
# would pass.   expect_output.sh REGEX COMMAND [ARGS...]
set -uo pipefail
regex=$1
shift
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
if [ $rc -ne 0 ]; then
  echo "expect_output: '$*' exited with status $rc" >&2
  exit 1
fi
if ! printf '%s\n' "$out" | grep -Eq -- "$regex"; then
  echo "expect_output: no line matches /$regex/" >&2
  exit 1
fi
