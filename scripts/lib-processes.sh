# Sourced by scripts that start local processes (fuzz-api.sh, soak.sh): a work directory, the pids to stop
# on exit, and waiting for a process's "listening on 127.0.0.1:PORT" line.

work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# Waits (at most $3 tenths of a second, default 300) for a line matching $2 in file $1 and prints the port
# after "127.0.0.1:".
wait_port() {
  local file=$1 pattern=$2 tries=${3:-300}
  for _ in $(seq "$tries"); do
    if grep -q "$pattern" "$file" 2>/dev/null; then
      grep "$pattern" "$file" | head -1 | sed -E 's/.*127\.0\.0\.1:([0-9]+).*/\1/'
      return 0
    fi
    sleep 0.1
  done
  echo "$(basename "$0"): no '$pattern' in $file:" >&2
  cat "$file" >&2
  return 1
}
