#!/usr/bin/env bash
# A PostgreSQL server configured as docs/operations.md tells a production install to configure
# it, for the benchmarks that measure what a big database costs (bench/history_growth.py).
# The machine's own server and the embedded one start from the defaults (128 MB of shared
# buffers, and autovacuum off on the CI machines' server): a month of history measured there
# measures the configuration, not the code (decision 131).
#
#   bench/production_server.sh start DIR [PORT]   # initdb on first use, then start (127.0.0.1:PORT)
#   bench/production_server.sh stop DIR
#
# then DATABASE_URL=postgres://postgres@127.0.0.1:PORT/postgres. The binaries: PG_BIN, or the
# newest of the machine's /usr/lib/postgresql/*/bin (built with lz4, which the embedded wheel's
# server lacks). SHARED_BUFFERS (6GB: a quarter of this 24 GB machine) and MAX_WAL_SIZE (4GB:
# what the disk beside a 70 GB database allows) override the two sizes.
set -euo pipefail

action=${1:?start or stop}
dir=$(realpath -m "${2:?the server directory}")
port=${3:-5441}
bin=${PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}
[ -x "$bin/pg_ctl" ] || { echo "no PostgreSQL binaries (set PG_BIN)" >&2; exit 1; }

as_server_user() {
    # The server refuses to run as root: hand it to the postgres user, as Debian's packages do.
    if [ "$(id -u)" = 0 ]; then su postgres -s /bin/bash -c "$*"; else bash -c "$*"; fi
}

configure() {
    cat >> "$dir/data/postgresql.conf" <<EOF
# bench/production_server.sh: docs/operations.md's settings for a production server
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '/tmp'
max_connections = 300
shared_buffers = ${SHARED_BUFFERS:-6GB}
effective_cache_size = 16GB
maintenance_work_mem = 1GB
max_wal_size = ${MAX_WAL_SIZE:-4GB}
checkpoint_timeout = 15min
wal_compression = lz4
autovacuum = on
autovacuum_vacuum_scale_factor = 0.01
autovacuum_analyze_scale_factor = 0.01
# pg_prewarm as operations.md says; pg_stat_statements for the per-statement figures
shared_preload_libraries = 'pg_prewarm,pg_stat_statements'
EOF
}

case $action in
start)
    if [ ! -f "$dir/data/PG_VERSION" ]; then
        mkdir -p "$dir"
        [ "$(id -u)" = 0 ] && chown postgres "$dir"
        as_server_user "'$bin/initdb' -D '$dir/data' --auth=trust -U postgres --encoding=UTF8 --no-locale" >/dev/null
        configure
    fi
    as_server_user "'$bin/pg_ctl' -D '$dir/data' -l '$dir/server.log' -w start" ;;
stop)
    as_server_user "'$bin/pg_ctl' -D '$dir/data' -m fast -w stop" ;;
*)
    echo "start or stop" >&2; exit 2 ;;
esac
