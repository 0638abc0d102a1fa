#!/usr/bin/env bash
# kv_server: the commands whose keys meet (RENAME RENAMENX MSETNX SMOVE LMOVE RPOPLPUSH SINTER SUNION
# SDIFF SINTERSTORE SUNIONSTORE SDIFFSTORE) and LPUSHX RPUSHX HINCRBY HINCRBYFLOAT HSETNX HKEYS HVALS
# HSTRLEN SMISMEMBER INCRBYFLOAT GETRANGE SETRANGE LSET LINSERT LTRIM LREM LPOS ZRANK ZPOPMAX
# ZREVRANK ZRANGEBYSCORE ZREVRANGEBYSCORE ZREMRANGEBYSCORE ZREMRANGEBYRANK ZINCRBY ZCOUNT ZMSCORE
# ZREVRANGE ZRANGE (BYSCORE BYLEX REV LIMIT) ZRANGEBYLEX ZREVRANGEBYLEX ZLEXCOUNT HSCAN SSCAN ZSCAN
# SRANDMEMBER HRANDFIELD ZRANDMEMBER: every reply that does not depend on a draw,
# error and wrong type included, the same as redis-server 7.0's (run beside it when it is installed,
# else as recorded from it in cmds_redis.txt); moves between keys of different workers, alone and in
# MULTI; the draws of the random picks, and the iterations of HSCAN, SSCAN and ZSCAN, by their properties; many clients moving elements between the
# same two keys at once, none lost or doubled; and SCAN and KEYS while such moves run, no key twice.
#
#   kv_cmds_test.sh PATH/TO/kv_server
set -euo pipefail
here=$(dirname "$0")
source "$here/../../scripts/kv_common.sh"

kv_test_init
server_bin=${1:?usage: kv_cmds_test.sh PATH/TO/kv_server}
py=/usr/bin/python3 # the interpreter with redis-py (Debian python3-redis)
client=$here/cmds_client.py
KV_LOG=$tmp/server.err kv_start "$server_bin" --workers 3

want=$here/cmds_redis.txt
if command -v redis-server >/dev/null; then
    port=$(free_port)
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no >/dev/null &
    kv_extra_pids+=($!)
    wait_ready "$port"
    "$py" "$client" replies "$port" >"$tmp/redis.txt" || fail "the cases against redis-server"
    want=$tmp/redis.txt
    diff -q "$here/cmds_redis.txt" "$want" >/dev/null ||
        echo "kv_cmds_test: this redis-server answers otherwise than the one cmds_redis.txt was recorded from"
else
    echo "kv_cmds_test: redis-server not installed: replies checked against cmds_redis.txt"
fi
"$py" "$client" replies "$KV_PORT" >"$tmp/kv.txt" || fail "the cases against kv_server"
diff -u "$want" "$tmp/kv.txt" || fail "kv_server's replies differ from redis-server's (above: - Redis, + kv_server)"
echo "replies: $(wc -l <"$tmp/kv.txt") the same as redis-server's"

"$py" "$client" workers "$KV_PORT" || fail "moves between keys of different workers"
"$py" "$client" ranges "$KV_PORT" || fail "GETRANGE and SETRANGE of long strings"
"$py" "$client" random_picks "$KV_PORT" || fail "SRANDMEMBER, HRANDFIELD and ZRANDMEMBER's draws"
"$py" "$client" scans "$KV_PORT" || fail "HSCAN, SSCAN and ZSCAN's iterations"
"$py" "$client" concurrent "$KV_PORT" || fail "concurrent moves between the same keys"
redis-cli -p "$KV_PORT" PING >/dev/null || fail "kv_server died"
# SCAN and KEYS while SMOVEs run, on a server with a network thread of its own (where the moves
# came between two workers' reads of one slice).
kv_extra_pids+=("$KV_PID")
KV_LOG=$tmp/scan.err kv_start "$server_bin" --workers 2 --net-threads 1
"$py" "$client" scan_during_moves "$KV_PORT" || fail "SCAN and KEYS while keys move"
echo "kv_cmds_test: ok"
