#!/usr/bin/env bash
# A real mlmond under valgrind: register a process, serve good and bad
# requests on both sockets, let it see the process exit, then SIGTERM.
# Passes when it exits 0 with no memory error, no definite leak and no fd
# left open beyond stdio.
set -euo pipefail
mlmond=$1
command -v valgrind >/dev/null || { echo "no valgrind"; exit 77; }
command -v curl >/dev/null || { echo "no curl"; exit 77; }

dir=$(mktemp -d /tmp/mlmond-vg-XXXXXX)
sleeper=
cleanup() {
    [ -n "$sleeper" ] && kill "$sleeper" 2>/dev/null || true
    [ -n "${vgpid:-}" ] && kill -KILL "$vgpid" 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT
: >"$dir/empty.conf"
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

valgrind --quiet --leak-check=full --errors-for-leak-kinds=definite --error-exitcode=99 \
    --track-fds=yes --log-file="$dir/vg.log" \
    "$mlmond" -c "$dir/empty.conf" --db "$dir/db" --listen "127.0.0.1:$port" --socket "$dir/sock" \
    --statsd-socket "$dir/statsd.sock" --statsd-udp none --interval 200ms 2>"$dir/stderr" &
vgpid=$!

for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$port/v1/health" >/dev/null 2>&1 && break
    sleep 0.2
done
curl -sf "http://127.0.0.1:$port/v1/health" >/dev/null

sleep 30 &
sleeper=$!
u() { curl -s --unix-socket "$dir/sock" "$@"; }
resp=$(u -X POST -d "{\"pid\":$sleeper,\"name\":\"vg\",\"children\":true,\"tags\":{\"a\":\"b\"}}" http://x/v1/runs)
echo "register: $resp"
id=$(echo "$resp" |
    /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
sleep 1
for path in /v1/health /v1/system /v1/runs "/v1/runs?state=all" "/v1/runs/$id" "/v1/runs/$id/samples?step=1s" \
    "/v1/runs/$id/throughput?window=1s,1m" /v1/runs/abc "/v1/runs/$id/throughput?window=5x" /nope; do
    curl -s "http://127.0.0.1:$port$path" >/dev/null
done
# what applications report: StatsD (good and garbage), observations, marks
/usr/bin/python3 - "$dir/statsd.sock" "$id" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
for d in [f"infer:{i % 40}.5|ms|#run:{sys.argv[2]},category:model\nreq:1|c|#run:{sys.argv[2]}\nq:{i}|g|#run:{sys.argv[2]}" for i in range(300)] + ["", ":", "a:NaN|ms", "x" * 20000, "b:1|c"]:
    s.sendto(d.encode(), sys.argv[1])
PY
u -X POST -d '[{"op":"pre","ms":1.5,"category":"prep"},{"op":"hits","count":2},{"op":"depth","gauge":3}]' "http://x/v1/runs/$id/observations" >/dev/null
u -X POST -d '[{"op":"pre"}]' "http://x/v1/runs/$id/observations" >/dev/null
u -X POST -d '{"label":"warm"}' "http://x/v1/runs/$id/marks" >/dev/null
sleep 1.2
for path in "/v1/runs/$id/latency?window=1m&q=50,99.9" "/v1/runs/$id/latency?since_mark=warm" "/v1/runs/$id/marks" \
    "/v1/runs/$id/latency?q=0" "/v1/runs/$id/samples?from=10s"; do
    curl -s "http://127.0.0.1:$port$path" >/dev/null
done
curl -s -X POST "http://127.0.0.1:$port/v1/runs" -d '{}' >/dev/null
u -X POST -d 'not json' http://x/v1/runs >/dev/null
u -X POST -d "$(head -c 70000 /dev/zero | tr '\0' x)" http://x/v1/runs >/dev/null
kill "$sleeper"
wait "$sleeper" 2>/dev/null || true
sleeper=
sleep 1
state=$(curl -s "http://127.0.0.1:$port/v1/runs/$id" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')

kill -TERM "$vgpid"
rc=0
wait "$vgpid" || rc=$?
vgpid=
cat "$dir/vg.log"
echo "run state after the process exited: $state; mlmond exit status under valgrind: $rc"
[ "$state" = exited ] || { echo "FAIL: the exit was not noticed"; exit 1; }
[ "$rc" -eq 0 ] || { echo "FAIL: exit status $rc (99 = valgrind found errors)"; cat "$dir/stderr"; exit 1; }
# --track-fds lists every fd still open at exit; the only acceptable ones
# are those mlmond inherited (stdio, valgrind's log, the test runner's)
leaked=$(awk '/Open (file descriptor|AF_)/ { fd = $0; getline; if ($0 !~ /inherited from parent/) print fd }' "$dir/vg.log")
if [ -n "$leaked" ]; then
    echo "FAIL: file descriptors left open at exit:"
    echo "$leaked"
    exit 1
fi
echo "valgrind: clean shutdown"
