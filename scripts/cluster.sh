#!/bin/sh
# Manage deid's private PostgreSQL cluster (a project-local, git-ignored
# directory, its own port and socket, run by an unprivileged OS user).
#   cluster.sh start | stop | url [database] | status | ensure-user
# Environment: DEID_PGDATA (default ./.pgdata), DEID_PGPORT (default 54329),
#              DEID_OS_USER (default deid), PG_BINDIR (default from pg_config),
#              DEID_PG_OPTIONS (extra server options at start, e.g. "-c shared_buffers=128MB").
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
PGROOT="${DEID_PGDATA:-$here/.pgdata}"
PORT="${DEID_PGPORT:-54329}"
OSUSER="${DEID_OS_USER:-deid}"
BINDIR="${PG_BINDIR:-$(pg_config --bindir)}"
resolve() {   # the server's paths never go through the (maybe private) checkout
    [ -L "$PGROOT" ] && PGROOT=$(readlink -f "$PGROOT")
    DATA="$PGROOT/data"
    SOCK="$PGROOT/run"
}
resolve
DB="${DEID_DB:-deid}"

as_owner() {
    if [ "$(id -un)" = "$OSUSER" ]; then "$@"; else (cd / && runuser -u "$OSUSER" -- "$@"); fi
}

ensure_user() {
    if [ "$(id -u)" = 0 ] && ! id "$OSUSER" >/dev/null 2>&1; then
        useradd --system --user-group --no-create-home --shell /usr/sbin/nologin "$OSUSER"
    fi
}

init() {
    ensure_user
    if [ ! -e "$PGROOT" ] && [ "$(id -u)" = 0 ] && ! runuser -u "$OSUSER" -- test -x "$(dirname "$PGROOT")"; then
        # The checkout is not reachable by the unprivileged server user (e.g. a
        # clone in a mode-0700 directory): keep the cluster in a directory of its
        # own and link it from the project.
        real="/var/tmp/deid-cluster-$(printf '%s' "$PGROOT" | md5sum | cut -c1-12)"
        mkdir -p "$real"
        ln -s "$real" "$PGROOT"
        resolve
    fi
    mkdir -p "$PGROOT"
    if [ "$(id -u)" = 0 ]; then chown "$OSUSER": "$PGROOT/"; fi
    chmod 0755 "$PGROOT/"
    if [ ! -f "$DATA/PG_VERSION" ]; then
        as_owner "$BINDIR/initdb" -D "$DATA" -U postgres --auth=trust --encoding=UTF8 \
            --locale=C.UTF-8 >"$PGROOT/initdb.log" 2>&1 || { cat "$PGROOT/initdb.log" >&2; exit 1; }
        as_owner sh -c "cat >> '$DATA/postgresql.conf'" <<CONF
# deid private cluster
port = $PORT
listen_addresses = ''
unix_socket_directories = '$SOCK'
unix_socket_permissions = 0700
shared_buffers = 512MB
work_mem = 64MB
maintenance_work_mem = 256MB
max_wal_size = 4GB
log_min_messages = warning
CONF
    fi
    # Durability is PostgreSQL's default (fsync, full_page_writes, synchronous_commit on): a
    # committed, verified release survives a crash. Clusters made by older versions of this
    # script turned them off; take those lines out.
    if grep -Eq '^(fsync|synchronous_commit|full_page_writes) = off' "$DATA/postgresql.conf"; then
        as_owner sed -i -E '/^(fsync|synchronous_commit|full_page_writes) = off/d' "$DATA/postgresql.conf"
        if as_owner "$BINDIR/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
            as_owner "$BINDIR/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null
        fi
    fi
    as_owner mkdir -p "$SOCK"
}

start() {
    init
    if as_owner "$BINDIR/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
        echo "deid cluster already running on port $PORT (socket $SOCK)"
    else
        # -p: the port asked for now wins over the one written at initdb (a
        # cluster directory reused by a clone at the same path, another port)
        as_owner "$BINDIR/pg_ctl" -D "$DATA" -l "$PGROOT/server.log" -w -t 60 -o "-p $PORT ${DEID_PG_OPTIONS:-}" start >/dev/null \
            || { tail -20 "$PGROOT/server.log" >&2; exit 1; }
        echo "deid cluster started on port $PORT (socket $SOCK)"
    fi
    if ! "$BINDIR/psql" -h "$SOCK" -p "$PORT" -U postgres -d postgres -Atqc \
            "SELECT 1 FROM pg_database WHERE datname = '$DB'" | grep -q 1; then
        "$BINDIR/createdb" -h "$SOCK" -p "$PORT" -U postgres "$DB"
    fi
}

stop() {
    if [ -f "$DATA/PG_VERSION" ] && as_owner "$BINDIR/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
        as_owner "$BINDIR/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null
        echo "deid cluster stopped"
    else
        echo "deid cluster is not running"
    fi
}

url() {
    enc=$(printf '%s' "$SOCK" | sed 's|%|%25|g; s|/|%2F|g; s| |%20|g')
    echo "postgresql://postgres@$enc:$PORT/${1:-$DB}"
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    url) url "${2:-}" ;;
    status) as_owner "$BINDIR/pg_ctl" -D "$DATA" status ;;
    ensure-user) ensure_user ;;
    *) echo "usage: $0 start|stop|url|status" >&2; exit 2 ;;
esac
