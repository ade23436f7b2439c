#!/usr/bin/env bash
# (Re)starts every service the tests need and waits until each answers: MariaDB, Redis,
# RabbitMQ (the machine's own, started the way the machine starts them) and a 3-master Redis
# Cluster on 127.0.0.1:7001-7003 for the gate's cluster suite, and the tools wrk,
# redis-benchmark, chromium and the backup drill's mariadb-dump (installed from Debian's
# packages when missing) and mailpit
# (go install). With CI=true a service that still does not answer, or a tool that could not be
# installed, fails the script (the tests must not pass by skipping).
set -uo pipefail
CLUSTER_DIR=${CLUSTER_DIR:-/tmp/cardshop-redis-cluster}
CLUSTER_PORTS=(7001 7002 7003)
failed=()

wait_for() { # name, seconds, command...
  local name=$1 secs=$2; shift 2
  for ((i = 0; i < secs * 5; i++)); do
    if "$@" >/dev/null 2>&1; then echo "ok: $name"; return 0; fi
    sleep 0.2
  done
  echo "NOT REACHABLE: $name"; failed+=("$name"); return 1
}

tcp_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

# MariaDB
if ! mysqladmin -uroot -h127.0.0.1 ping >/dev/null 2>&1; then
  echo "starting MariaDB"
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd >/dev/null 2>&1 || true
fi
wait_for "MariaDB 127.0.0.1:3306" 60 mysqladmin -uroot -h127.0.0.1 ping

# Redis
if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  echo "starting Redis"
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log >/dev/null 2>&1 || true
fi
wait_for "Redis 127.0.0.1:6379" 30 redis-cli -h 127.0.0.1 -p 6379 ping

# RabbitMQ
if ! tcp_open 127.0.0.1 5672; then
  echo "starting RabbitMQ"
  rabbitmq-server -detached >/dev/null 2>&1 || true
fi
wait_for "RabbitMQ 127.0.0.1:5672" 120 tcp_open 127.0.0.1 5672

# Redis Cluster: three masters, no replicas, nothing on disk.
cluster_ok() { redis-cli -p "${CLUSTER_PORTS[0]}" cluster info 2>/dev/null | grep -q 'cluster_state:ok'; }
if ! cluster_ok; then
  echo "starting the Redis Cluster on ports ${CLUSTER_PORTS[*]}"
  for p in "${CLUSTER_PORTS[@]}"; do redis-cli -p "$p" shutdown nosave >/dev/null 2>&1 || true; done
  rm -rf "$CLUSTER_DIR"; mkdir -p "$CLUSTER_DIR"
  for p in "${CLUSTER_PORTS[@]}"; do
    mkdir -p "$CLUSTER_DIR/$p"
    redis-server --daemonize yes --bind 127.0.0.1 --port "$p" --cluster-enabled yes \
      --cluster-config-file "$CLUSTER_DIR/$p/nodes.conf" --cluster-node-timeout 5000 \
      --save "" --appendonly no --dir "$CLUSTER_DIR/$p" --logfile "$CLUSTER_DIR/$p/redis.log" >/dev/null 2>&1
  done
  for p in "${CLUSTER_PORTS[@]}"; do wait_for "Redis cluster node $p" 20 redis-cli -p "$p" ping; done
  redis-cli --cluster create $(printf '127.0.0.1:%s ' "${CLUSTER_PORTS[@]}") --cluster-replicas 0 --cluster-yes >/dev/null 2>&1 || true
fi
wait_for "Redis Cluster 127.0.0.1:${CLUSTER_PORTS[0]}-${CLUSTER_PORTS[-1]}" 30 cluster_ok

# Tools of the ceiling tests and the load check, wrk and redis-benchmark, and the browser of
# the console's browser test, chromium: from Debian's packages.
missing=()
command -v wrk >/dev/null 2>&1 || missing+=(wrk)
command -v redis-benchmark >/dev/null 2>&1 || missing+=(redis-tools)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
# The container image's test (TestMakeRelease/image) builds it with podman and runs it with
# runc (crun cannot run on this kind of machine's hybrid cgroups).
command -v podman >/dev/null 2>&1 || missing+=(podman)
command -v runc >/dev/null 2>&1 || missing+=(runc)
# A font with Chinese glyphs, for the console's Chinese pages in the browser test (their width
# on a phone, their screenshots): without one Chromium draws boxes. (Not `fc-list | grep -q`:
# grep quits at the first match, fc-list dies of SIGPIPE, and pipefail fails the pipe.)
cjk_font() { [[ -n $(fc-list 'WenQuanYi Zen Hei' family 2>/dev/null) ]]; }
cjk_font || missing+=(fonts-wqy-zenhei)
# The backup drill (TestBackupDrill) dumps and restores with MariaDB's client tools.
{ command -v mariadb-dump >/dev/null 2>&1 || command -v mysqldump >/dev/null 2>&1; } || missing+=(mariadb-client)
if ((${#missing[@]})); then
  echo "installing ${missing[*]} with apt-get"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"; } >/dev/null 2>&1 || true
fi
command -v wrk >/dev/null 2>&1 && echo "ok: wrk" || { echo "NOT INSTALLED: wrk"; failed+=(wrk); }
command -v redis-benchmark >/dev/null 2>&1 && echo "ok: redis-benchmark" || { echo "NOT INSTALLED: redis-benchmark"; failed+=(redis-benchmark); }
command -v chromium >/dev/null 2>&1 && echo "ok: chromium" || { echo "NOT INSTALLED: chromium"; failed+=(chromium); }
for tool in podman runc; do
  command -v "$tool" >/dev/null 2>&1 && echo "ok: $tool" || { echo "NOT INSTALLED: $tool"; failed+=("$tool"); }
done
cjk_font && echo "ok: fonts-wqy-zenhei" || { echo "NOT INSTALLED: fonts-wqy-zenhei"; failed+=(fonts-wqy-zenhei); }
{ command -v mariadb-dump >/dev/null 2>&1 || command -v mysqldump >/dev/null 2>&1; } && echo "ok: mariadb-dump" || { echo "NOT INSTALLED: mariadb-dump"; failed+=(mariadb-dump); }
# Mailpit, the SMTP server the mail tests run one of per test (adapters/lab/mailpit) and
# make run's inbox: installed with go install into $(go env GOPATH)/bin when missing.
MAILPIT_VERSION=v1.33.1
mailpit_bin() { command -v mailpit 2>/dev/null || { local b; b="$(go env GOPATH 2>/dev/null | cut -d: -f1)/bin/mailpit"; [[ -x $b ]] && echo "$b"; }; }
if [[ -z $(mailpit_bin) ]]; then
  echo "installing mailpit $MAILPIT_VERSION with go install"
  GOFLAGS= go install "github.com/axllent/mailpit@$MAILPIT_VERSION" >/dev/null 2>&1 || true
fi
if [[ -n $(mailpit_bin) ]]; then echo "ok: mailpit ($(mailpit_bin))"; else echo "NOT INSTALLED: mailpit"; failed+=(mailpit); fi
# The chaos mode starts a MariaDB and a Redis of its own from the machine's binaries.
for tool in mariadb-install-db mariadbd redis-server; do
  command -v "$tool" >/dev/null 2>&1 && echo "ok: $tool" || { echo "NOT INSTALLED: $tool"; failed+=("$tool"); }
done

if ((${#failed[@]})); then
  echo "unreachable: ${failed[*]}"
  if [[ "${CI:-}" == "true" ]]; then exit 1; fi
  echo "(not CI: the integration suites that need them will be skipped)"
fi
exit 0
