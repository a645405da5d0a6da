#!/bin/sh
# A sharded warehouse on this machine: a coordinator and N node clusters, each a private
# PostgreSQL cluster of its own (scripts/cluster.sh: own data directory, own port, own socket
# directory of mode 0700), so that one node can be stopped or killed on its own.
#   shard-cluster.sh start            start (initdb on first use) the coordinator and the nodes
#   shard-cluster.sh stop             stop them all
#   shard-cluster.sh setup DB         (re)create database DB on every cluster with deid and
#                                     plproxy, and on the coordinator the PL/Proxy cluster
#                                     "deid_shards": a SQL/MED server over the nodes' DB
#   shard-cluster.sh sample DB [N]    load N sample patients, hash-sharded by patient id
#   shard-cluster.sh url WHO [DB]     a libpq URL: WHO = coord | node0 | node1 | ...
#   shard-cluster.sh pid WHO          the postmaster's process id (the tests kill -9 it)
#   shard-cluster.sh member WHO start|stop   one member only (the tests stop a node)
#   shard-cluster.sh remove           stop every member found under DEID_SHARD_DIR (whatever
#                                     DEID_SHARD_NODES made it) and delete the directory (make clean)
# Environment: DEID_SHARD_DIR (default ./.shard), DEID_SHARD_PORT (the coordinator's port,
# default 54341; node i listens on DEID_SHARD_PORT + 1 + i), DEID_SHARD_NODES (default 2, a
# power of 2: PL/Proxy's partitions, up to 64), DEID_SHARD_SHARED_BUFFERS (every member's
# shared_buffers, default 128MB: small, so that 8 nodes fit on one machine and a backend's
# VmHWM holds little of the buffer pool), PG_BINDIR, DEID_OS_USER (as scripts/cluster.sh).
#
# Connections: the coordinator reaches each node over the node's Unix socket, as the calling
# role (PL/Proxy appends user=current_user); the user mapping is FOR PUBLIC and holds no
# password, and the server's options hold none: the nodes trust local connections through a
# socket directory only the clusters' OS user may enter (mode 0700). docs/sharding.md.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
DIR="${DEID_SHARD_DIR:-$here/.shard}"
BASE="${DEID_SHARD_PORT:-54341}"
NODES="${DEID_SHARD_NODES:-2}"
BUFFERS="${DEID_SHARD_SHARED_BUFFERS:-128MB}"
BINDIR="${PG_BINDIR:-$(pg_config --bindir)}"
export PG_BINDIR="$BINDIR"
SERVER=deid_shards

case "$NODES" in 1|2|4|8|16|32|64) ;; *) echo "DEID_SHARD_NODES must be a power of 2" >&2; exit 2 ;; esac

port_of() {   # coord | nodeI
    case "$1" in
        coord) echo "$BASE" ;;
        node*) echo $((BASE + 1 + ${1#node})) ;;
        *) echo "unknown member $1" >&2; exit 2 ;;
    esac
}
members() { echo coord; i=0; while [ "$i" -lt "$NODES" ]; do echo "node$i"; i=$((i + 1)); done; }
cl() {        # cl WHO cluster.sh-args...
    local who=$1; shift
    DEID_PGDATA="$DIR/$who" DEID_PGPORT=$(port_of "$who") \
        DEID_PG_OPTIONS="-c shared_buffers=$BUFFERS" sh "$here/scripts/cluster.sh" "$@"
}
url() { cl "$1" url "${2:-postgres}"; }
sock() { local root="$DIR/$1"; [ -L "$root" ] && root=$(readlink -f "$root"); echo "$root/run"; }
psql_on() {   # psql_on WHO DB psql-args...
    local on=$1 in=$2; shift 2
    "$BINDIR/psql" -X -q -v ON_ERROR_STOP=1 "$(url "$on" "$in")" "$@"
}

start() {
    mkdir -p "$DIR"
    for m in $(members); do cl "$m" start >/dev/null; done
    echo "coordinator on port $BASE, $NODES nodes on ports $((BASE + 1))..$((BASE + NODES))"
}

stop() { for m in $(members); do cl "$m" stop >/dev/null || true; done; echo "sharded warehouse stopped"; }

remove() {    # every member directory there is, linked ones included (a checkout in a 0700 directory)
    [ -e "$DIR" ] || return 0
    for root in "$DIR"/*; do
        if [ -e "$root/data/PG_VERSION" ]; then
            DEID_PGDATA="$root" sh "$here/scripts/cluster.sh" stop >/dev/null || true
        fi
        if [ -L "$root" ]; then rm -rf "$(readlink -f "$root")"; fi
    done
    rm -rf "$DIR"
    echo "removed $DIR"
}

setup() {
    db=$1
    for m in $(members); do
        psql_on "$m" postgres -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" -c "CREATE DATABASE \"$db\""
        psql_on "$m" "$db" -c "SET client_min_messages = warning" \
            -c "CREATE EXTENSION plproxy" -c "CREATE EXTENSION deid CASCADE"
    done
    # the warehouse's secret key, the same on every member (the proofs of logged runs); through
    # psql's standard input, never a command line
    key=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
    for m in $(members); do
        echo "SELECT deid.set_distributed_key('$key')" | psql_on "$m" "$db" -o /dev/null
    done
    opts=""
    i=0
    while [ "$i" -lt "$NODES" ]; do
        opts="$opts${opts:+, }p$i 'dbname=$db host=$(sock "node$i") port=$(port_of "node$i")'"
        i=$((i + 1))
    done
    psql_on coord "$db" \
        -c "CREATE SERVER $SERVER FOREIGN DATA WRAPPER plproxy OPTIONS ($opts)" \
        -c "CREATE USER MAPPING FOR PUBLIC SERVER $SERVER" \
        -c "GRANT USAGE ON FOREIGN SERVER $SERVER TO PUBLIC"
}

sample() {    # the table on every member (empty on the coordinator: its definition), rows by shard
    db=$1 n=${2:-4000}
    for m in $(members); do
        psql_on "$m" "$db" -f "$here/scripts/sample_shard.sql" -v n="$n" -v nodes="$NODES" \
            -v part="$( [ "$m" = coord ] && echo -1 || echo "${m#node}")"
    done
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    remove) remove ;;
    setup) setup "${2:?database}" ;;
    sample) sample "${2:?database}" "${3:-4000}" ;;
    url) url "${2:?coord|nodeI}" "${3:-postgres}" ;;
    member) cl "${2:?coord|nodeI}" "${3:?start|stop}" ;;
    pid) root="$DIR/$2"; [ -L "$root" ] && root=$(readlink -f "$root"); head -1 "$root/data/postmaster.pid" ;;
    *) echo "usage: $0 start|stop|remove|setup DB|sample DB [N]|url WHO [DB]|pid WHO" >&2; exit 2 ;;
esac
