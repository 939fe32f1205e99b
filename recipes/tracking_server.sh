#!/usr/bin/env bash
# A shared MLflow tracking server on PostgreSQL, for many workers at once (SQLite is for one host).
#
#   bash recipes/tracking_server.sh start [DIR] [PORT]    # prints the tracking URI to use
#   bash recipes/tracking_server.sh stop  [DIR]
#
# DIR (default ./tracking) holds the database cluster (DIR/pgdata), the artifacts the server
# proxies (DIR/artifacts), the logs and the pid files. PORT (default 5000) is the server's; the
# database listens on PGPORT (default 5433) on 127.0.0.1 only. PostgreSQL comes from Debian's
# package (installed with apt-get when missing); the database driver from the `server` extra.
# Jobs anywhere reach it with MLFLOW_TRACKING_URI=http://<this host>:PORT (or
# mlflow.tracking_uri=...). Restarting with the same DIR keeps every run.
set -euo pipefail

command=${1:-start}
dir=$(realpath -m "${2:-tracking}")
port=${3:-5000}
pgport=${PGPORT:-5433}
root=$(cd "$(dirname "$0")/.." && pwd)
mlflow_bin=${MLFLOW_BIN:-$root/.venv/bin/mlflow}
python_bin=${PYTHON_BIN:-$root/.venv/bin/python}

postgres_bin() {
    ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1
}

as_postgres() {  # PostgreSQL refuses to run as root: root runs it as the postgres user
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case "$command" in
start)
    if [ -z "$(postgres_bin)" ]; then
        echo "installing PostgreSQL (Debian's package)..." >&2
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
    fi
    bin=$(postgres_bin)
    mkdir -p "$dir/artifacts"
    if [ "$(id -u)" = 0 ] && ! runuser -u postgres -- test -x "$dir"; then
        echo "the postgres user cannot reach $dir (a parent directory is private to root);" \
            "choose a directory under one it can traverse, e.g. /srv or /var/lib" >&2
        exit 1
    fi
    if [ ! -f "$dir/pgdata/PG_VERSION" ]; then
        mkdir -p "$dir/pgdata"
        [ "$(id -u)" = 0 ] && chown postgres "$dir/pgdata"
        as_postgres "$bin/initdb" -D "$dir/pgdata" -U postgres --auth=trust -E UTF8 >/dev/null
    fi
    [ "$(id -u)" = 0 ] && chown postgres "$dir" "$dir/pgdata"
    if ! as_postgres "$bin/pg_ctl" -D "$dir/pgdata" status >/dev/null 2>&1; then
        as_postgres "$bin/pg_ctl" -D "$dir/pgdata" -l "$dir/pgdata/postgres.log" -w \
            -o "-p $pgport -k /tmp -c listen_addresses=127.0.0.1" start >/dev/null
    fi
    as_postgres "$bin/psql" -h 127.0.0.1 -p "$pgport" -U postgres -tAc \
        "SELECT 1 FROM pg_database WHERE datname = 'mlflow'" | grep -q 1 \
        || as_postgres "$bin/createdb" -h 127.0.0.1 -p "$pgport" -U postgres mlflow
    if [ -f "$dir/mlflow.pid" ] && kill -0 "$(cat "$dir/mlflow.pid")" 2>/dev/null; then
        echo "http://127.0.0.1:$port"
        exit 0
    fi
    nohup "$mlflow_bin" server --host 0.0.0.0 --port "$port" --workers 2 \
        --backend-store-uri "postgresql+psycopg2://postgres@127.0.0.1:$pgport/mlflow" \
        --artifacts-destination "$dir/artifacts" >"$dir/mlflow.log" 2>&1 &
    echo $! >"$dir/mlflow.pid"
    for _ in $(seq 1 120); do  # creating the tables on a first start takes a few seconds
        if "$python_bin" -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$port/health', timeout=2)" 2>/dev/null; then
            echo "http://127.0.0.1:$port"
            exit 0
        fi
        kill -0 "$(cat "$dir/mlflow.pid")" 2>/dev/null || break
        sleep 1
    done
    echo "the MLflow server did not start; see $dir/mlflow.log" >&2
    tail -n 20 "$dir/mlflow.log" >&2
    exit 1
    ;;
stop)
    if [ -f "$dir/mlflow.pid" ]; then
        pid=$(cat "$dir/mlflow.pid")
        pkill -TERM -P "$pid" 2>/dev/null || true  # its gunicorn/uvicorn workers
        kill "$pid" 2>/dev/null || true
        rm -f "$dir/mlflow.pid"
    fi
    bin=$(postgres_bin)
    if [ -n "$bin" ] && [ -f "$dir/pgdata/PG_VERSION" ]; then
        as_postgres "$bin/pg_ctl" -D "$dir/pgdata" -m fast -w stop >/dev/null 2>&1 || true
    fi
    ;;
*)
    echo "usage: $0 start|stop [DIR] [PORT]" >&2
    exit 2
    ;;
esac
