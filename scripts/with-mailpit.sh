#!/usr/bin/env bash
# with-mailpit.sh — run a command (make run's service) with a Mailpit to receive the shop's
# e-mail: SMTP on 127.0.0.1:1025, the web inbox on http://127.0.0.1:8025. The mailpit binary
# is installed with `go install` on first use; when that fails the command runs without mail
# (and says so). With CARDSHOP_SMTP_ADDR set it starts nothing. A Mailpit already answering on those ports is used as it is and left
# running; one this script started is stopped when the command ends.
#
# Before the command starts it prints, in a few plain lines, where the shop, the console (with
# the dev login, CARDSHOP_ADMIN_TOKEN) and the inbox are. The service logs warnings and errors
# only, unless CARDSHOP_LOG_LEVEL says otherwise or CARDSHOP_ACCESS_LOG=true (then info, the
# access log's level).
#
# Ctrl-C stops the command quietly: on a terminal the command runs as a job of its own in the
# foreground, so the terminal's SIGINT reaches it (the service stops gracefully and exits 0)
# and not make, which would otherwise die of it and report "Interrupt"; this script then exits
# with the command's status.
#
#   scripts/with-mailpit.sh go run ./cmd/cardshop serve
set -uo pipefail

MAILPIT_VERSION=v1.33.1
SMTP=127.0.0.1:1025
HTTP=127.0.0.1:8025
GO=${GO:-go}
PID=""

cleanup() {
	if [[ -n $PID ]] && kill -0 "$PID" 2>/dev/null; then
		kill -TERM "$PID" 2>/dev/null
		wait "$PID" 2>/dev/null
	fi
	[[ -n ${DATA:-} ]] && rm -rf "$DATA"
}
trap cleanup EXIT
trap 'exit 130' TERM

ready() { curl -fsS -o /dev/null --max-time 1 "http://$HTTP/readyz" 2>/dev/null; }

# find_mailpit prints the binary's path: PATH, $(go env GOPATH)/bin, or a fresh go install.
find_mailpit() {
	local bin
	bin=$(command -v mailpit) && { echo "$bin"; return 0; }
	bin="$($GO env GOPATH 2>/dev/null | cut -d: -f1)/bin/mailpit"
	[[ -x $bin ]] && { echo "$bin"; return 0; }
	echo "installing mailpit $MAILPIT_VERSION (go install, first use only)..." >&2
	GOFLAGS= $GO install "github.com/axllent/mailpit@$MAILPIT_VERSION" >&2 && [[ -x $bin ]] && { echo "$bin"; return 0; }
	return 1
}

# use_mailpit points the service at the local Mailpit: clear text, a sender of its own.
use_mailpit() {
	export CARDSHOP_SMTP_ADDR=$SMTP CARDSHOP_SMTP_TLS=none
	export CARDSHOP_SMTP_FROM=${CARDSHOP_SMTP_FROM:-"Card shop <shop@cardshop.localhost>"}
}

MAIL=""
if [[ -n ${CARDSHOP_SMTP_ADDR:-} ]]; then
	MAIL="CARDSHOP_SMTP_ADDR=$CARDSHOP_SMTP_ADDR (set by you: no Mailpit started)"
elif ready; then
	MAIL="http://$HTTP (a Mailpit already running)"
	use_mailpit
elif BIN=$(find_mailpit); then
	DATA=$(mktemp -d)
	"$BIN" --smtp "$SMTP" --listen "$HTTP" --database "$DATA/mailpit.db" --disable-version-check --quiet \
		>"$DATA/mailpit.log" 2>&1 &
	PID=$!
	for _ in $(seq 50); do ready && break; kill -0 "$PID" 2>/dev/null || break; sleep 0.2; done
	if ready; then
		MAIL="http://$HTTP"
		use_mailpit
	else
		echo "mailpit did not start (ports 1025/8025 taken?): running without e-mail" >&2
	fi
else
	echo "mailpit could not be installed: running without e-mail" >&2
fi

# The address the service listens on, as a browser on this machine reaches it.
ADDR=${CARDSHOP_HTTP_ADDR:-127.0.0.1:8080}
HOSTPART=${ADDR%:*}
case $HOSTPART in "" | 0.0.0.0 | "[::]") HOSTPART=127.0.0.1 ;; esac
BASE="http://$HOSTPART:${ADDR##*:}"
if [[ -z ${CARDSHOP_LOG_LEVEL:-} ]]; then
	export CARDSHOP_LOG_LEVEL=warn
	[[ ${CARDSHOP_ACCESS_LOG:-} == true ]] && CARDSHOP_LOG_LEVEL=info
fi
echo "cardshop on the memory adapters: they keep nothing after exit (Ctrl-C stops it)"
echo "  shop:       $BASE/"
echo "  console:    $BASE/console  (log in with ${CARDSHOP_ADMIN_TOKEN:-your CARDSHOP_ADMIN_TOKEN})"
[[ -n $MAIL ]] && echo "  mail:       $MAIL"

if [[ -t 0 ]]; then
	set -m
	"$@" &
	fg %1 >/dev/null
	exit $?
fi
"$@"
