#!/usr/bin/env bash
# Usage: tools/screenshots.sh [BUILD_DIR]   (default: build)
#
# Makes doc/web-overview.png, doc/web-run.png and doc/web-job.png from a real
# run: an mlmond of BUILD_DIR on a temporary directory watches a "trainer" (a
# Python process that burns some CPU, grows its memory by 4 MiB/s, writes a
# file and sends StatsD timings of three ops), a busy process, an idle one and
# the four ranks of a job (each sending timings of two ops, rank 2 a quarter
# slower in one) and one that ends after 20 s; two marks are put on the
# trainer (at its start and 15 s later); after a minute headless
# chromium takes the three pages at 1280x900 (the job page 1280x1300).
# With TALL=FILE it also takes the whole run page (1280x2800) into FILE.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
tmp=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
printf '[leak]\nwindows = 20s\ngrace = 5s\n' > "$tmp/mlmond.conf"
"$build/daemon/mlmond" -c "$tmp/mlmond.conf" --db "$tmp/mlmond.db" --listen "127.0.0.1:$port" \
    --socket "$tmp/mlmond.sock" --statsd-socket "$tmp/statsd.sock" --statsd-udp none --interval 500ms \
    2> "$tmp/mlmond.log" &
pids+=($!)
for _ in $(seq 50); do [ -S "$tmp/mlmond.sock" ] && break; sleep 0.1; done

api() { curl -sf --unix-socket "$tmp/mlmond.sock" -H 'Content-Type: application/json' "$@"; }

python3 - "$tmp/statsd.sock" "$tmp/out.bin" <<'PY' &
import os, random, socket, sys, time
path, out = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
held, t0 = [], time.monotonic()
time.sleep(1)  # registered meanwhile
with open(out, "wb") as f:
    while time.monotonic() - t0 < 600:
        step = time.monotonic()
        held.append(bytearray(os.urandom(1024)) * 400)  # 400 KiB every 100 ms
        f.write(os.urandom(64 * 1024))
        slow = 1.8 if time.monotonic() - t0 > 35 else 1.0
        for _ in range(8):
            s.sendto(b"forward:%.2f|ms|#category:model" % (random.lognormvariate(2.2, 0.25) * slow), path)
        s.sendto(b"data_load:%.2f|ms|#category:io" % random.lognormvariate(1.5, 0.6), path)
        s.sendto(b"optimizer_step:%.2f|ms|#category:model" % random.lognormvariate(1.0, 0.2), path)
        while time.monotonic() - step < 0.06:
            pass  # some CPU
        time.sleep(max(0, 0.1 - (time.monotonic() - step)))
PY
trainer=$!
pids+=($trainer)
python3 -c 'import time
t = time.monotonic()
while True:
    s = time.monotonic()
    while time.monotonic() - s < 0.025: pass
    time.sleep(0.075)' &
busy=$!
pids+=($busy)
sleep 3600 &
idle=$!
pids+=($idle)

api -X POST -d "{\"pid\":$trainer,\"name\":\"resnet50-train\",\"tags\":{\"team\":\"vision\",\"job_id\":\"exp-42\"}}" \
    http://localhost/v1/runs > "$tmp/run.json"
id=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["id"])' "$tmp/run.json")
api -X POST -d "{\"pid\":$busy,\"name\":\"tokenizer\",\"tags\":{\"team\":\"nlp\"}}" http://localhost/v1/runs > /dev/null
api -X POST -d "{\"pid\":$idle,\"name\":\"notebook\"}" http://localhost/v1/runs > /dev/null
api -X POST -d '{"label":"train:start"}' "http://localhost/v1/runs/$id/marks" > /dev/null
# a run that ends before the pictures: the overview lists it among the finished
sleep 20 &
pids+=($!)
api -X POST -d "{\"pid\":$!,\"name\":\"tokenize-shard\",\"tags\":{\"team\":\"nlp\"}}" http://localhost/v1/runs > /dev/null

# the ranks of a job: each its own process (StatsD timings land on the
# sender's run), rank 2's forward pass 25 % slower
job=llama-ft-7
for rank in 0 1 2 3; do
    python3 - "$tmp/statsd.sock" "$rank" <<'PY' &
import random, socket, sys, time
path, rank = sys.argv[1], int(sys.argv[2])
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
slow = 1.25 if rank == 2 else 1.0
time.sleep(1)  # registered meanwhile
while True:
    for _ in range(5):
        s.sendto(b"forward:%.3f|ms|#category:model" % (random.lognormvariate(3.0, 0.08) * slow), path)
    s.sendto(b"allreduce:%.3f|ms|#category:comm" % random.lognormvariate(2.3, 0.15), path)
    time.sleep(0.2)  # the timings take about 110 ms of the 200
PY
    pids+=($!)
    api -X POST -d "{\"pid\":$!,\"name\":\"llama-rank$rank\",\"tags\":{\"job_id\":\"$job\",\"rank\":\"$rank\"}}" \
        http://localhost/v1/runs > /dev/null
done
sleep 15
api -X POST -d '{"label":"warmup-done"}' "http://localhost/v1/runs/$id/marks" > /dev/null
sleep 45

shot() {
    chromium --headless=new --no-sandbox --disable-gpu --no-first-run --user-data-dir="$tmp/profile" \
        --hide-scrollbars --window-size="${3:-1280,900}" --virtual-time-budget=5000 --screenshot="$1" "$2" 2> /dev/null
}
shot doc/web-overview.png "http://127.0.0.1:$port/"
shot doc/web-run.png "http://127.0.0.1:$port/runs/$id"
shot doc/web-job.png "http://127.0.0.1:$port/jobs/$job" 1280,1300
if [ -n "${TALL:-}" ]; then
    shot "$TALL" "http://127.0.0.1:$port/runs/$id" 1280,2800
fi
echo "screenshots: doc/web-overview.png doc/web-run.png doc/web-job.png (run $id, job $job)"
