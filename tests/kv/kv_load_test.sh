#!/usr/bin/env bash
# kv_load (bench/kv_load.c), the load generator of bench/kv_vs_redis: every test against kv_server
# with 1 and 2 workers (and redis-server when installed) prints its line, with the server's CPU
# when given its pid, and exits 0; a reply of the wrong type fails it (exit 1, naming the reply); a
# mistake on its command line exits 2.
#
#   kv_load_test.sh KV_LOAD_PATH KV_SERVER_PATH
set -euo pipefail
load=$1 kv=$2
cd "$(dirname "$0")/../.."
source scripts/kv_common.sh
kv_test_init
export KV_LOG=$tmp/server.err

# run LABEL PORT PID: the quick run of every test; each must print its line.
run() {
    "$load" --port "$2" --quick --tests all --server-pid "$3" --label "$1" >"$tmp/out" 2>"$tmp/err" ||
        fail "kv_load against $1: exit status $?: $(cat "$tmp/err")"
    cat "$tmp/out"
    for t in PING SET GET INCR LPUSH HSET MGET MSET MULTI MSET_TAG MULTI_TAG; do
        grep -q "^bench=kv_load server=$1 test=$t .* req_per_s=[0-9]* .*server_ns_per_req=[0-9.]* " "$tmp/out" ||
            fail "kv_load against $1: no line for $t"
    done
}

for workers in 1 2; do
    kv_start "$kv" --workers "$workers"
    run "kv_server_$workers" "$KV_PORT" "$KV_PID"
    "$load" --port "$KV_PORT" --quick --tests GET,MGET --threads 2 --connections 3 --pipeline 7 --keys 100 \
        --label two_threads >/dev/null || fail "kv_load, 2 threads over 3 connections"
    kill "$KV_PID" && wait "$KV_PID" || true
    KV_PID=
done

if command -v redis-server >/dev/null; then
    port=$(free_port)
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no >/dev/null &
    rpid=$!
    kv_extra_pids+=("$rpid")
    wait_ready "$port"
    run redis-server "$port" "$rpid"
    # INCR on a value that is no integer: an error reply, which kv_load must refuse.
    redis-cli -p "$port" SET ctr:000000000000 abc >/dev/null
    status=0
    "$load" --port "$port" --quick --tests INCR --keys 1 --label bad >/dev/null 2>"$tmp/err" || status=$?
    ((status == 1)) && grep -q "INCR.*an integer >= 1 expected, got \"-ERR" "$tmp/err" ||
        fail "kv_load took an error reply for INCR's integer (exit status $status): $(cat "$tmp/err")"
else
    echo "kv_load_test: redis-server not installed: kv_server only"
fi

status=0
"$load" --port 1 --frobnicate >/dev/null 2>"$tmp/err" || status=$?
((status == 2)) && grep -q "unknown argument '--frobnicate'" "$tmp/err" || fail "a wrong argument: exit status $status"
status=0
"$load" --tests GET >/dev/null 2>"$tmp/err" || status=$?
((status == 2)) && grep -q "port is required" "$tmp/err" || fail "no --port: exit status $status"
echo "kv_load_test: passed"
