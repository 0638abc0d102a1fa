#!/usr/bin/env bash
# kv_server: keys that expire: SET's options, EXPIRE and its kin, TTL, and expiry across membership changes.
#
#   kv_expire_test.sh PATH/TO/kv_server
set -euo pipefail
here=$(dirname "$0")
source "$here/../../scripts/kv_common.sh"

server_bin=${1:?usage: kv_expire_test.sh PATH/TO/kv_server}
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
echo "kv_expire_test: passed"
