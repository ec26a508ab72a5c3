#!/usr/bin/env bash
# Start a throwaway PostgreSQL server on loopback for the ledger tests and benchmarks; idempotent.
#
# Installs Debian's `postgresql` package if no server binaries are found (needs root), creates a cluster with
# `initdb` in $PPLX_PG_DIR (default /tmp/pplx-test-postgres) owned by the `postgres` user when run as root,
# listens on 127.0.0.1:$PPLX_PG_PORT (default 54329) with trust authentication (local test use only: no
# password exists), creates the database `pplx_test`, and prints its URL on stdout:
#
#   export PERPLEXITY_TEST_POSTGRES_URL="$(bash scripts/start-postgres.sh)"
set -euo pipefail

port="${PPLX_PG_PORT:-54329}"
data="${PPLX_PG_DIR:-/tmp/pplx-test-postgres}"
database=pplx_test
log() { echo "start-postgres: $*" >&2; }

find_bin() {
  local dir
  for dir in /usr/lib/postgresql/*/bin; do
    if [[ -x "$dir/initdb" ]]; then
      echo "$dir"
    fi
  done | sort -V | tail -n 1
}

bin="$(find_bin)"
if [[ -z "$bin" ]]; then
  if [[ $EUID -ne 0 ]]; then
    log 'PostgreSQL is not installed; run as root, or: apt-get install -y postgresql'
    exit 1
  fi
  log 'installing PostgreSQL (Debian package postgresql)'
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
  bin="$(find_bin)"
fi

# As root the server runs as `postgres` (it refuses to run as root); otherwise as the current user.
if [[ $EUID -eq 0 ]]; then
  as_owner() { runuser -u postgres -- "$@"; }
  owner=postgres
else
  as_owner() { "$@"; }
  owner="$(id -un)"
fi

if [[ ! -s "$data/PG_VERSION" ]]; then
  log "creating a cluster in $data"
  mkdir -p "$data"
  chown "$owner" "$data"
  chmod 700 "$data"
  as_owner "$bin/initdb" --pgdata="$data" --username=postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 \
    >/dev/null
  cat >>"$data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$data'
max_connections = 200
CONF
fi

ready() { "$bin/pg_isready" --host=127.0.0.1 --port="$port" --timeout=2 >/dev/null 2>&1; }
if ! ready; then
  if as_owner "$bin/pg_ctl" status --pgdata="$data" >/dev/null 2>&1; then
    for _ in $(seq 6); do ready && break; sleep 0.5; done  # still starting up?
  fi
  if ! ready; then
    # Not answering: any postmaster.pid left is stale (the server was killed with the machine's other processes).
    as_owner "$bin/pg_ctl" stop --pgdata="$data" --mode=immediate >/dev/null 2>&1 || true
    rm -f "$data/postmaster.pid"
    log "starting the server on 127.0.0.1:$port"
    if ! as_owner "$bin/pg_ctl" start --pgdata="$data" --wait --timeout=60 --log="$data/server.log" >/dev/null; then
      tail -n 20 "$data/server.log" >&2 || true
      exit 1
    fi
  fi
fi

psql=("$bin/psql" --host=127.0.0.1 --port="$port" --username=postgres --no-psqlrc --quiet --tuples-only)
if [[ "$("${psql[@]}" --dbname=postgres --command="SELECT 1 FROM pg_database WHERE datname = '$database'")" != *1* ]]; then
  "${psql[@]}" --dbname=postgres --command="CREATE DATABASE $database" >/dev/null
fi
echo "postgresql://postgres@127.0.0.1:$port/$database"
