# Shared by the serving measurement scripts (source it): start a draftsmith server in the background
# and wait until /health answers ok, at most 180 s; fail early with the log's name if it exits.
# Usage: start_server PORT LOG [serve args...]   (sets SERVER_PID)
start_server() {
  local port=$1 log=$2
  shift 2
  ${DS:-.venv/bin/draftsmith} serve --port "$port" "$@" > "$log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 180); do
    curl -s --noproxy '*' "http://127.0.0.1:$port/health" | grep -q '"ok"' && return 0
    kill -0 "$SERVER_PID" 2>/dev/null || { echo "server on port $port exited; see $log" >&2; return 1; }
    sleep 1
  done
  echo "server on port $port not healthy after 180 s; see $log" >&2
  return 1
}
