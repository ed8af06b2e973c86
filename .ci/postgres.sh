#!/usr/bin/env bash
# A throwaway PostgreSQL server for the checkpointer tests (tests/test_persistence.py).
#
#   source .ci/postgres.sh       start the server, or find it running, and export
#                                LOOP_GUARD_TEST_POSTGRES_URI in the calling shell
#   eval "$(.ci/postgres.sh)"    the same from any shell (prints an `export ...` line)
#   .ci/postgres.sh uri          print the URI only
#   .ci/postgres.sh stop         stop the server and delete its data directory
#
# When no PostgreSQL server binaries are found it installs Debian's `postgresql` package
# (apt-get; needs root or sudo). The server listens on 127.0.0.1 only, on a free port, with
# password authentication and a data directory under $LOOP_GUARD_PG_DIR (default
# ${TMPDIR:-/tmp}/loop-guard-postgres); fsync is off, it is for tests only. A second call finds
# the running server and just prints its URI again. Progress goes to stderr, the result to
# stdout. As root, the server runs as the `postgres` user (PostgreSQL refuses to run as root).

_loop_guard_postgres() (
    set -euo pipefail
    action=${1:-start}
    base=${LOOP_GUARD_PG_DIR:-${TMPDIR:-/tmp}/loop-guard-postgres}
    data=$base/data
    marker=$base/.loop-guard-postgres
    database=loop_guard_test

    say() { printf 'postgres.sh: %s\n' "$*" >&2; }
    fail() { say "error: $*"; exit 1; }
    find_bindir() {
        local dir
        dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
        if [ -n "$dir" ] && [ -x "$dir/initdb" ]; then
            printf '%s\n' "$dir"
        elif command -v initdb >/dev/null 2>&1; then
            dirname "$(command -v initdb)"
        fi
    }
    as_server() {
        if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
    }
    running() {
        [ -f "$base/port" ] && [ -f "$data/PG_VERSION" ] &&
            as_server "$bin/pg_ctl" -D "$data" status >/dev/null 2>&1 &&
            "$bin/pg_isready" -q -h 127.0.0.1 -p "$(cat "$base/port")"
    }
    free_port() {
        local port _
        for _ in $(seq 100); do
            port=$((20000 + RANDOM % 40000))
            if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
                printf '%s\n' "$port"
                return 0
            fi
        done
        return 1
    }
    uri() {
        printf 'postgresql://postgres:%s@127.0.0.1:%s/%s\n' \
            "$(cat "$base/password")" "$(cat "$base/port")" "$database"
    }

    bin=$(find_bindir)

    if [ "$action" = stop ]; then
        [ -d "$base" ] || { say "nothing to stop in $base"; return 0; }
        [ -f "$marker" ] || fail "$base was not made by this script; not deleting it"
        if [ -n "$bin" ] && [ -f "$data/PG_VERSION" ]; then
            as_server "$bin/pg_ctl" -D "$data" -m fast stop >&2 || true
        fi
        rm -rf "$base"
        say "stopped; removed $base"
        return 0
    fi
    [ "$action" = start ] || [ "$action" = uri ] || fail "unknown action '$action' (start, uri, stop)"

    if [ -z "$bin" ]; then
        command -v apt-get >/dev/null 2>&1 ||
            fail "no PostgreSQL server binaries found and no apt-get to install them"
        sudo=()
        if [ "$(id -u)" != 0 ]; then
            command -v sudo >/dev/null 2>&1 || fail "installing PostgreSQL needs root or sudo"
            sudo=(sudo)
        fi
        say "installing PostgreSQL from the system packages"
        "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
        "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -qq --no-install-recommends postgresql >&2
        bin=$(find_bindir)
        [ -n "$bin" ] || fail "the postgresql package installed no server binaries"
    fi
    if [ "$(id -u)" = 0 ]; then
        id postgres >/dev/null 2>&1 || fail "running as root needs a 'postgres' user"
    fi

    if running; then
        say "reusing the server in $base"
        uri
        return 0
    fi

    if [ ! -f "$data/PG_VERSION" ]; then
        [ ! -e "$base" ] || [ -f "$marker" ] || fail "$base exists and was not made by this script"
        mkdir -p "$base"
        chmod 700 "$base"
        touch "$marker"
        od -An -tx1 -N16 /dev/urandom | tr -d ' \n' >"$base/password"
        chmod 600 "$base/password"
        if [ "$(id -u)" = 0 ]; then chown -R postgres: "$base"; fi
        say "creating a cluster in $data ($("$bin/postgres" --version))"
        as_server "$bin/initdb" -D "$data" -U postgres --pwfile="$base/password" \
            --auth-local=trust --auth-host=scram-sha-256 -E UTF8 --locale=C --no-sync >&2
    fi

    port=$(free_port) || fail "no free TCP port found on 127.0.0.1"
    printf '%s\n' "$port" >"$base/port"
    say "starting the server on 127.0.0.1:$port"
    as_server "$bin/pg_ctl" -D "$data" -l "$base/server.log" -w -t 60 -o \
        "-c listen_addresses=127.0.0.1 -p $port -c unix_socket_directories='$base' \
         -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
        start >&2 || fail "the server did not start; see $base/server.log"

    export PGPASSWORD
    PGPASSWORD=$(cat "$base/password")
    exists=$("$bin/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -tAc \
        "SELECT 1 FROM pg_database WHERE datname = '$database'")
    if [ "$exists" != 1 ]; then
        "$bin/createdb" -h 127.0.0.1 -p "$port" -U postgres "$database"
    fi
    uri
)

if (return 0 2>/dev/null); then
    # Sourced: export the URI into the calling shell (fails the caller under `set -e`).
    LOOP_GUARD_TEST_POSTGRES_URI=$(_loop_guard_postgres start) || return 1
    export LOOP_GUARD_TEST_POSTGRES_URI
    printf 'postgres.sh: exported LOOP_GUARD_TEST_POSTGRES_URI=%s\n' \
        "$LOOP_GUARD_TEST_POSTGRES_URI" >&2
    unset -f _loop_guard_postgres
else
    case "${1:-start}" in
        start)
            uri=$(_loop_guard_postgres start) || exit 1
            printf 'export LOOP_GUARD_TEST_POSTGRES_URI=%q\n' "$uri"
            ;;
        uri) _loop_guard_postgres uri ;;
        stop) _loop_guard_postgres stop ;;
        *)
            printf 'usage: source %s | %s [start|uri|stop]\n' "$0" "$0" >&2
            exit 2
            ;;
    esac
fi
