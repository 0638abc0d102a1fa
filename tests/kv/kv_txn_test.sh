#!/usr/bin/env bash
# kv_server: transactions and atomic commands of several keys. MULTI/EXEC/DISCARD as redis-cli sends
# them, with Redis's errors (EXEC or DISCARD without MULTI, nested MULTI, EXECABORT after a command
# refused while queued, WATCH inside MULTI); MSET and DEL of many keys; redis-py's default pipeline (MULTI/EXEC);
# WATCH as Redis's, and optimistic locking with it under churn (watch_client.py);
# atomicity under churn: no MULTI reads a pair of keys half written by a MULTI of an MSET, of two SETs
# or of a DEL while workers are added, removed and crashed (txn_client.py); EXEC pipelined, its
# replies in order, under churn and resets, with --net-threads 0 and 2 (txn_order_client.py); a MULTI
# that never ends stays bounded (multi_flood_client.py).
#
#   kv_txn_test.sh PATH/TO/kv_server
set -euo pipefail
here=$(dirname "$0")
source "$here/../../scripts/kv_common.sh"

server_bin=${1:?usage: kv_txn_test.sh PATH/TO/kv_server}
command -v redis-cli >/dev/null || { echo "FAIL: redis-cli not found (Debian package redis-tools)"; exit 1; }
/usr/bin/python3 -c 'import redis' 2>/dev/null || { echo "FAIL: redis-py not found (Debian package python3-redis)"; exit 1; }
kv_test_init
# (Under ASan, freed memory waits in its quarantine, 256 MB by default, and counts in the RSS that
# multi_flood_client.py measures: a small one keeps the RSS a measure of what the server holds, as in
# kv_server_test.sh. Harmless for a build without ASan.)
ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=4 KV_LOG=$tmp/server.err \
    kv_start "$server_bin" --workers 3 --max-args 4096
cli() { redis-cli -p "$KV_PORT" "$@"; }
clis() { redis-cli -p "$KV_PORT" | sed "/^$/d"; } # commands from stdin; no blank line after an error

# --- MULTI ... EXEC on one connection: QUEUED each, then the replies in order as one array.
got=$(printf 'MULTI\nSET a 10\nINCR a\nMSET b 2 c 3\nGET a\nMGET a b c\nDEL b c nosuch\nPING\nEXEC\n' | clis)
expect "MULTI/EXEC" "$(printf 'OK\nQUEUED\nQUEUED\nQUEUED\nQUEUED\nQUEUED\nQUEUED\nQUEUED\nOK\n11\nOK\n11\n11\n2\n3\n2\nPONG')" "$got"
# --- The errors, as Redis words them.
expect "EXEC without MULTI" "ERR EXEC without MULTI" "$(cli EXEC)"
expect "DISCARD without MULTI" "ERR DISCARD without MULTI" "$(cli DISCARD)"
expect "nested MULTI" "$(printf 'OK\nERR MULTI calls can not be nested\nQUEUED\nOK')" \
    "$(printf 'MULTI\nMULTI\nSET n 1\nDISCARD\n' | clis)"
expect "DISCARD drops what was queued" "" "$(cli GET n)"
expect "a refused command aborts EXEC" \
    "$(printf "OK\nERR wrong number of arguments for 'set' command\nQUEUED\nEXECABORT Transaction discarded because of previous errors.")" \
    "$(printf 'MULTI\nSET x\nSET y 1\nEXEC\n' | clis)"
expect "nothing of an aborted EXEC ran" "" "$(cli GET y)"
expect "an unknown command aborts EXEC" "EXECABORT Transaction discarded because of previous errors." \
    "$(printf 'MULTI\nNOSUCH 1\nSET y 1\nEXEC\n' | clis | tail -1)"
expect "an admin command is refused inside MULTI" "ERR kv_server runs no admin or keyspace command inside MULTI" \
    "$(printf 'MULTI\nFLUSHDB\nDISCARD\n' | clis | sed -n 2p)"
expect "WATCH inside MULTI" "ERR WATCH inside MULTI is not allowed" "$(printf 'MULTI\nWATCH a\nDISCARD\n' | clis | sed -n 2p)"
# An EXEC with arguments aborts the transaction and ends it, as in Redis (it answered an arity error
# and stayed in MULTI: the SET after it was queued and lost); SHUTDOWN is refused inside MULTI (it was
# queued, and the EXEC shut the server down).
expect "EXEC x inside MULTI ends it" \
    "$(printf "OK\nQUEUED\nEXECABORT Transaction discarded because of: wrong number of arguments for 'exec' command\nOK\nERR EXEC without MULTI\n2")" \
    "$(printf 'MULTI\nSET ea 1\nEXEC x\nSET eb 2\nEXEC\nGET eb\n' | clis)"
expect "nothing of it ran" "" "$(cli GET ea)"
expect "EXEC x outside MULTI" "EXECABORT Transaction discarded because of: wrong number of arguments for 'exec' command" \
    "$(cli EXEC x)"
expect "SHUTDOWN inside MULTI" \
    "$(printf 'OK\nERR Command not allowed inside a transaction\nEXECABORT Transaction discarded because of previous errors.\nPONG')" \
    "$(printf 'MULTI\nSHUTDOWN\nEXEC\nPING\n' | clis)"
expect "WATCH, then an EXEC no write came between" "$(printf 'OK\nOK\nQUEUED\nOK')" \
    "$(printf 'WATCH a nosuch\nMULTI\nSET a 1\nEXEC\n' | clis)"
expect "WATCH, then a write of its own, then EXEC: a null array (an empty line)" "$(printf 'OK\nOK\nOK\nQUEUED\n')" \
    "$(printf 'WATCH a\nSET a 2\nMULTI\nSET a 3\nEXEC\n' | cli)"
expect "nothing of it ran" 2 "$(cli GET a)"
expect "an empty EXEC" "$(printf 'OK')" "$(printf 'MULTI\nEXEC\n' | clis | head -1)"
# QUIT inside MULTI is not queued: it answers OK and closes, and the transaction goes, as in Redis (it
# was queued, and the EXEC after it ran the SET). Its arguments are ignored, as Redis's (its arity was
# 1: QUIT x inside MULTI was an arity error, the transaction's EXEC aborted, the connection stayed).
quit_in_multi='
import socket, sys
def cmd(*args):
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
quit = cmd(b"QUIT", *(a.encode() for a in sys.argv[2:]))
s.sendall(cmd(b"DEL", b"q") + cmd(b"MULTI") + cmd(b"SET", b"q", b"1") + quit + cmd(b"EXEC"))
got = b""
while True:
    chunk = s.recv(4096)
    if not chunk:
        break
    got += chunk
print(repr(got))'
for quit_args in "" x "x y"; do
    expect "QUIT $quit_args inside MULTI" "$(printf '%s' "b':0\\r\\n+OK\\r\\n+QUEUED\\r\\n+OK\\r\\n'")" \
        "$(/usr/bin/python3 -c "$quit_in_multi" "$KV_PORT" $quit_args)"
    expect "nothing of the transaction QUIT $quit_args ended ran" "" "$(cli GET q)"
done
# --- MSET and DEL of many keys: atomic, as Redis's (one multi-key job, at most 1024 keys).
args=(); for ((i = 0; i < 300; i++)); do args+=("m$i" "v$i"); done
expect "MSET of 300 keys" OK "$(cli MSET "${args[@]}")"
expect "MSET's keys" "v0 v150 v299" "$(cli MGET m0 m150 m299 | tr '\n' ' ' | sed 's/ $//')"
keys=(); for ((i = 0; i < 300; i++)); do keys+=("m$i"); done
expect "DEL of 300 keys" 300 "$(cli DEL "${keys[@]}")"
# More keys than one multi-key job holds: refused whole, with a word for it.
args=(); for ((i = 0; i < 1100; i++)); do args+=("n$i" "v$i"); done
expect "MSET of 1100 keys" "ERR a command holds at most 1024 keys on kv_server" "$(cli MSET "${args[@]}")"
expect "none of them set" "" "$(cli GET n0)"
# An MGET's keys are grouped by their worker (parts_by_owner): keys of three workers interleaved, two
# each, run as one job a worker, three in all (a job a key, or a group a run of adjacent keys of one
# worker, would be six). The server is idle meanwhile: no timer, no balancer.
declare -A by_owner=()
for ((i = 0; i < 60; i++)); do
    o=$(cli SHARD.OWNER "g$i")
    by_owner[$o]="${by_owner[$o]:-} g$i"
done
read -ra g0 <<<"${by_owner[w0]}"
read -ra g1 <<<"${by_owner[w1]}"
read -ra g2 <<<"${by_owner[w2]}"
((${#g0[@]} >= 2 && ${#g1[@]} >= 2 && ${#g2[@]} >= 2)) || fail "60 keys left a worker with fewer than 2"
cli MSET "${g0[0]}" a0 "${g0[1]}" a1 "${g1[0]}" b0 "${g1[1]}" b1 "${g2[0]}" c0 "${g2[1]}" c1 >/dev/null
executed() { cli INFO shard | grep -o 'executed=[0-9]*' | awk -F= '{ s += $2 } END { print s }'; }
before=$(executed)
expect "MGET of three workers' keys interleaved" "$(printf 'a0
b0
c0
a1
b1
c1')" \
    "$(cli MGET "${g0[0]}" "${g1[0]}" "${g2[0]}" "${g0[1]}" "${g1[1]}" "${g2[1]}")"
expect "jobs that MGET ran (one a worker)" 3 $(($(executed) - before))
# No reader sees an MSET or a DEL of two workers' keys half done.
/usr/bin/python3 "$here/mset_atomic_client.py" "$KV_PORT" 2 || fail "MSET and DEL atomic across workers"
# MGET and EXISTS run a job a worker: every value reads back while keys move between workers.
/usr/bin/python3 "$here/mget_churn_client.py" "$KV_PORT" 2 || fail "MGET and EXISTS under churn"
# A transaction of more than 1024 keys (three MSETs of 400): the third is refused, EXEC aborts.
mset400() { local i; printf 'MSET'; for ((i = 0; i < 400; i++)); do printf ' big%d%d v' "$1" "$i"; done; echo; }
got=$({ echo MULTI; mset400 1; mset400 2; mset400 3; echo EXEC; } | clis)
expect "a transaction over 1024 keys" "$(printf "OK\nQUEUED\nQUEUED\nERR a transaction holds at most 1024 keys on kv_server\nEXECABORT Transaction discarded because of previous errors.")" "$got"
expect "an aborted transaction set nothing" "" "$(cli GET big10)"
# A key many times: one key, the last value wins.
expect "MSET of one key thrice" OK "$(cli MSET r 1 r 2 r 3)"
expect "its value" 3 "$(cli GET r)"

# A client that queues command after command in MULTI and never EXECs: the server stays bounded
# (what one request may hold, --max-request), refuses the rest, and EXEC aborts.
/usr/bin/python3 "$here/multi_flood_client.py" "$KV_PORT" "$KV_PID" 200 64 || fail "a client that queues without end in MULTI"

# --- redis-py, default settings, then atomicity under churn.
/usr/bin/python3 "$here/txn_client.py" "$KV_PORT" 4 || fail "redis-py transactions (above)"
expect "still serving" PONG "$(cli PING)"
# --- WATCH: Redis's cases one by one, then optimistic locking under churn (watch_client.py).
/usr/bin/python3 "$here/watch_client.py" "$KV_PORT" 4 || fail "WATCH (above)"
expect "still serving" PONG "$(cli PING)"
# --- EXEC pipelined hard, replies in order byte for byte, transfers audited, connections reset with
# EXECs unread, under churn: with the network on the workers (above) and on threads of its own.
/usr/bin/python3 "$here/txn_order_client.py" "$KV_PORT" 3 || fail "pipelined transactions (workers run the network)"
expect "still serving" PONG "$(cli PING)"
stop_pid "$KV_PID"
KV_LOG=$tmp/server2.err kv_start "$server_bin" --workers 3 --net-threads 2
/usr/bin/python3 "$here/txn_order_client.py" "$KV_PORT" 3 || fail "pipelined transactions (--net-threads 2)"
expect "still serving" PONG "$(cli PING)"
echo "kv_txn_test: passed"
