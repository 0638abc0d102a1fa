#!/usr/bin/env bash
# kv_server: the keyspace and server commands (INFO, SCAN, KEYS, CLIENT, HELLO, AUTH, CONFIG, COMMAND, TIME, FLUSHDB) as redis-cli and its --scan, --bigkeys and --stat use them.
#
#   kv_admin_test.sh PATH/TO/kv_server
set -euo pipefail
here=$(dirname "$0")
source "$here/../../scripts/kv_common.sh"

server_bin=${1:?usage: kv_admin_test.sh PATH/TO/kv_server}
tmp=$(mktemp -d)
cleanup() {
    [[ -n ${KV_PID:-} ]] && kill "$KV_PID" 2>/dev/null && wait "$KV_PID" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
    echo "FAIL: $*"
    echo "--- server stderr:"
    cat "$tmp/server.err" 2>/dev/null || true
    exit 1
}
expect() { # expect WHAT EXPECTED ACTUAL
    [[ $2 == "$3" ]] || fail "$1: expected '$2', got '$3'"
}

KV_LOG=$tmp/server.err kv_start "$server_bin" --workers 2
cli() { redis-cli -p "$KV_PORT" "$@"; }
expect "PING" PONG "$(cli PING)"
echo "kv_admin_test: passed"
