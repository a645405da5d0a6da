#!/bin/sh
# Install the system packages deid needs (run as root). Shared by the Makefile
# and docker/Dockerfile so that what the tests exercise is what the image runs.
#   - PostgreSQL 15 server + PL/Python 3 + pgTAP + server headers (PGXS)
#   - numpy for the server's interpreter (Debian's python3-numpy)
#   - pg_prove, and python3-venv for the client-side test environment
#   - PL/Proxy (postgresql-15-plproxy) for releases over sharded nodes
#   - chromium (headless) for the report's browser test
# Idempotent: installs only what is missing.
set -eu
PG_MAJOR="${PG_MAJOR:-15}"
PKGS="postgresql-$PG_MAJOR postgresql-plpython3-$PG_MAJOR postgresql-$PG_MAJOR-pgtap
postgresql-server-dev-$PG_MAJOR python3-numpy python3-pip python3-venv
libtap-parser-sourcehandler-pgtap-perl make
postgresql-$PG_MAJOR-plproxy chromium"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -z "$missing" ]; then
    echo "install-deps: all system packages present"
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "install-deps: missing packages:$missing; run 'sudo make deps' (needs root)" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# Do not let the Debian package create and start its own 'main' cluster: deid
# runs a private cluster (make start), and images run their own.
mkdir -p /etc/postgresql-common/createcluster.d
[ -f /etc/postgresql-common/createcluster.d/deid.conf ] || \
    echo "create_main_cluster = false" > /etc/postgresql-common/createcluster.d/deid.conf
apt-get update -q
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $missing
