#!/usr/bin/env bash
# A shared MLflow tracking server on PostgreSQL, for many workers at once (SQLite is for one host).
#
#   bash recipes/tracking_server.sh start [DIR] [PORT]    # prints the tracking URI to use
#   HOST=0.0.0.0 bash recipes/tracking_server.sh start    # reachable from other hosts (see below)
#   bash recipes/tracking_server.sh stop  [DIR]
#
# DIR (default ./tracking) holds the database cluster (DIR/pgdata), its password (DIR/pgpass,
# mode 0600), its socket (DIR/socket, private to the postgres user), the artifacts the server
# proxies (DIR/artifacts), the logs and the pid files. PORT (default 5000) is the server's, on
# HOST (default 127.0.0.1: this machine only); the database listens on PGPORT (default 5433) on
# 127.0.0.1 only and asks for a password (scram-sha-256), which the server reads from DIR/pgpass.
# PostgreSQL comes from Debian's package (installed with apt-get when missing); the database
# driver from the `server` extra. Restarting with the same DIR keeps every run. MLflow's job runner
# (GenAI jobs, nothing this library logs needs) stays off unless
# MLFLOW_SERVER_ENABLE_JOB_EXECUTION=true.
#
# MLflow's server has no authentication: whoever reaches HOST:PORT reads and writes every run.
# HOST=0.0.0.0 (jobs on other hosts: MLFLOW_TRACKING_URI=http://<this host>:PORT) exposes it to
# every network the machine is on; put it behind a reverse proxy with authentication, or run
# MLflow's basic-auth app (`mlflow server --app-name basic-auth`, docs/guides/cluster.md).
set -euo pipefail

command=${1:-start}
dir=$(realpath -m "${2:-tracking}")
port=${3:-5000}
pgport=${PGPORT:-5433}
host=${HOST:-127.0.0.1}
case "$host" in 0.0.0.0|::) here=127.0.0.1 ;; *) here=$host ;; esac  # where this host asks it
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
        # a password for the database's superuser, readable by its owner only
        (umask 077; "$python_bin" -c "import secrets; print(secrets.token_urlsafe(24))" \
            > "$dir/pgpass.new")
        [ "$(id -u)" = 0 ] && chown postgres "$dir/pgpass.new"
        as_postgres "$bin/initdb" -D "$dir/pgdata" -U postgres --auth=scram-sha-256 \
            --pwfile="$dir/pgpass.new" -E UTF8 >/dev/null
        (umask 077; echo "127.0.0.1:*:*:postgres:$(cat "$dir/pgpass.new")" > "$dir/pgpass")
        rm -f "$dir/pgpass.new"
    fi
    if grep -q "^[^#].*trust" "$dir/pgdata/pg_hba.conf"; then
        echo "$dir/pgdata lets anyone in without a password (made by an earlier version of" \
            "this script): start a new DIR, or set a password and scram-sha-256 in its" \
            "pg_hba.conf" >&2
        exit 1
    fi
    mkdir -p "$dir/socket"
    chmod 700 "$dir/socket"
    [ "$(id -u)" = 0 ] && chown postgres "$dir" "$dir/pgdata" "$dir/socket" "$dir/pgpass"
    export PGPASSFILE=$dir/pgpass  # psql, createdb and the server's driver read it
    if ! as_postgres "$bin/pg_ctl" -D "$dir/pgdata" status >/dev/null 2>&1; then
        as_postgres "$bin/pg_ctl" -D "$dir/pgdata" -l "$dir/pgdata/postgres.log" -w \
            -o "-p $pgport -k $dir/socket -c listen_addresses=127.0.0.1" start >/dev/null
    fi
    as_postgres env PGPASSFILE="$PGPASSFILE" "$bin/psql" -h 127.0.0.1 -p "$pgport" -U postgres \
        -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = 'mlflow'" | grep -q 1 \
        || as_postgres env PGPASSFILE="$PGPASSFILE" "$bin/createdb" -h 127.0.0.1 -p "$pgport" \
            -U postgres mlflow
    case "$host" in
    127.*|localhost|::1) ;;
    *) echo "HOST=$host: the MLflow server, which has no authentication, is open to whoever" \
           "reaches $host:$port; put a reverse proxy with authentication or MLflow's" \
           "basic-auth app in front (docs/guides/cluster.md)" >&2 ;;
    esac
    if [ -f "$dir/mlflow.pid" ] && kill -0 "$(cat "$dir/mlflow.pid")" 2>/dev/null; then
        echo "http://$here:$port"
        exit 0
    fi
    # without MLflow's job runner (its GenAI jobs: evaluations, trace roll-ups), which starts
    # eight processes beside the server's (a runner and seven huey consumers)
    MLFLOW_SERVER_ENABLE_JOB_EXECUTION=${MLFLOW_SERVER_ENABLE_JOB_EXECUTION:-false} \
        nohup "$mlflow_bin" server --host "$host" --port "$port" --workers 2 \
        --backend-store-uri "postgresql+psycopg2://postgres@127.0.0.1:$pgport/mlflow" \
        --artifacts-destination "$dir/artifacts" >"$dir/mlflow.log" 2>&1 &
    echo $! >"$dir/mlflow.pid"
    for _ in $(seq 1 120); do  # creating the tables on a first start takes a few seconds
        if "$python_bin" -c "import urllib.request as u; u.urlopen('http://$here:$port/health', timeout=2)" 2>/dev/null; then
            echo "http://$here:$port"
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
