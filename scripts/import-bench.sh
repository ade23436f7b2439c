#!/usr/bin/env bash
# import-bench.sh — import 1,000,000 codes through `cardshopctl import-codes` into `cardshop serve`
# on the memory adapters, and print the elapsed time and peak memory (VmHWM) of the command
# and of the server. Bounded: every step has a timeout; the server is stopped on exit.
#
#   scripts/import-bench.sh [N]      # N codes, default 1000000
set -euo pipefail

N=${1:-1000000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d)
SERVER_PID=""
cleanup() {
	if [[ -n $SERVER_PID ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
		kill -TERM "$SERVER_PID" 2>/dev/null || true
		wait "$SERVER_PID" 2>/dev/null || true
	fi
	rm -rf "$WORK"
}
trap cleanup EXIT

# Public development secrets, as the Makefile's DEV_ENV.
export CARDSHOP_ADMIN_TOKEN=dev-admin-token-change-me \
	CARDSHOP_PAYMENT_SECRET=dev-payment-secret-change-me \
	CARDSHOP_TOKEN_SECRET=dev-token-secret-change-me \
	CARDSHOP_ADAPTERS=memory CARDSHOP_LOG_LEVEL=warn

echo "building cardshop and cardshopctl …" >&2
(cd "$ROOT" && timeout 300 go build -o "$WORK/cardshop" ./cmd/cardshop && timeout 300 go build -o "$WORK/cardshopctl" ./cmd/cardshopctl)

echo "generating $N codes …" >&2
awk -v n="$N" 'BEGIN { for (i = 0; i < n; i++) printf "BENCH-%010d-K7Q2M9XW\n", i }' >"$WORK/codes.txt"
SIZE=$(stat -c %s "$WORK/codes.txt")

# A free port: bind to 0 and read what the kernel chose.
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
	echo $((20000 + RANDOM % 20000)))
BASE=http://127.0.0.1:$PORT
CARDSHOP_HTTP_ADDR=127.0.0.1:$PORT "$WORK/cardshop" serve 2>"$WORK/serve.log" &
SERVER_PID=$!
for _ in $(seq 100); do
	curl -fs "$BASE/healthz" >/dev/null 2>&1 && break
	kill -0 "$SERVER_PID" 2>/dev/null || { cat "$WORK/serve.log" >&2; exit 1; }
	sleep 0.1
done
curl -fs "$BASE/healthz" >/dev/null || { echo "the server did not start" >&2; cat "$WORK/serve.log" >&2; exit 1; }
curl -fs -XPOST "$BASE/admin/products" -H "Authorization: Bearer $CARDSHOP_ADMIN_TOKEN" \
	-d '{"id":1,"name":"Bench","price":100,"max_per_order":5}' >/dev/null
SERVER_BEFORE=$(awk '/^VmRSS/ {print $2}' "/proc/$SERVER_PID/status")

CMD=("$WORK/cardshopctl" import-codes -url "$BASE" -product 1 "$WORK/codes.txt")
START=$(date +%s.%N)
if [[ -x /usr/bin/time ]]; then
	timeout 600 /usr/bin/time -v -o "$WORK/time.txt" "${CMD[@]}" >"$WORK/report.txt" 2>"$WORK/progress.txt"
	CMD_KB=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$WORK/time.txt")
else
	# No /usr/bin/time: sample the command's VmHWM from /proc until it exits.
	"${CMD[@]}" >"$WORK/report.txt" 2>"$WORK/progress.txt" &
	CPID=$!
	CMD_KB=0
	for _ in $(seq 6000); do
		kb=$(awk '/^VmHWM/ {print $2}' "/proc/$CPID/status" 2>/dev/null || true)
		[[ -n $kb ]] && CMD_KB=$kb
		kill -0 "$CPID" 2>/dev/null || break
		sleep 0.1
	done
	wait "$CPID"
fi
END=$(date +%s.%N)
SERVER_KB=$(awk '/^VmHWM/ {print $2}' "/proc/$SERVER_PID/status")
RECONCILE=$(timeout 120 "$WORK/cardshopctl" reconcile -url "$BASE" -product 1 | tail -1 || true)

cat "$WORK/report.txt"
tail -1 "$WORK/progress.txt"
awk -v n="$N" -v size="$SIZE" -v start="$START" -v end="$END" -v cmd="$CMD_KB" -v srv="$SERVER_KB" -v before="$SERVER_BEFORE" 'BEGIN {
	printf "codes           %d (%.1f MiB file)\n", n, size / 1048576
	printf "elapsed         %.2f s\n", end - start
	printf "command peak    %.1f MiB RSS\n", cmd / 1024
	printf "server peak     %.1f MiB RSS (VmHWM; %.1f MiB before the import)\n", srv / 1024, before / 1024
}'
printf 'reconcile       %s\n' "$RECONCILE"
