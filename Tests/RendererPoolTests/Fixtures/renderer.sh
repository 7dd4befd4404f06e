#!/bin/sh
# A stand-in renderer process: optionally takes a while to start, prints "ready" once warm, and prints
# "ready" again after every "reset" line on stdin. Exits when stdin closes. Only shell builtins run in the
# loop, so the process has no children and dies at once when killed.
if [ -n "$1" ]; then sleep "$1"; fi
echo ready
while read -r line; do
  case "$line" in
    reset) echo ready ;;
    crash) exit 7 ;;
  esac
done
