#!/usr/bin/env bash
# kv_server: keys that expire: SET's options, EXPIRE and its kin, TTL, and expiry across membership changes.
#
#   kv_expire_test.sh PATH/TO/kv_server
#
# Checks each command's replies and errors (as redis-server 7 gives them); that keys nobody reads are
# deleted when their time comes (the keyed timers, not a read, reclaim them); and that while workers
# are added, removed and crashed, keys with a long time to live keep their values and their times, and
# keys with a short one are all deleted: each expiry followed its key through every change.
set -euo pipefail
here=$(dirname "$0")
source "$here/../../scripts/kv_common.sh"

server_bin=${1:?usage: kv_expire_test.sh PATH/TO/kv_server}
kv_test_init

KV_LOG=$tmp/server.err kv_start "$server_bin" --workers 2
cli() { redis-cli -p "$KV_PORT" "$@"; }
check() { # check EXPECTED COMMAND ARGS...: the reply as redis-cli prints it
    local want=$1
    shift
    expect "$*" "$want" "$(cli "$@")"
}
ms_now() { echo $(($(date +%s%N) / 1000000)); }
ttl_near() { # ttl_near WANT KEY: TTL within 10 s below WANT (the time between two commands, loaded)
    local got
    got=$(cli TTL "$2")
    ((got <= $1 && got > $1 - 10)) || fail "TTL $2: expected about $1, got '$got'"
}

# --- SET's options.
check OK SET a 1 EX 100
ttl_near 100 a
check OK SET a 2 KEEPTTL
ttl_near 100 a
check OK SET a 3
check -1 TTL a
check "" SET a 4 NX
check 3 SET a 5 XX GET
check 5 GET a
check "" SET nokey 1 XX GET
check 0 EXISTS nokey
check "ERR invalid expire time in 'set' command" SET b 1 EX 0
check "ERR invalid expire time in 'set' command" SET b 1 PX -5
check "ERR invalid expire time in 'set' command" SET b 1 EX 9223372036854775807
check "ERR value is not an integer or out of range" SET b 1 EX abc
check "ERR syntax error" SET b 1 EX 10 PX 100
check "ERR syntax error" SET b 1 EX 10 KEEPTTL
check "ERR syntax error" SET b 1 NX XX
check "ERR syntax error" SET b 1 EX
check "ERR syntax error" SET b 1 FOO
check OK SET b 1 PXAT 1 # a time past: set, and gone at once
check 0 EXISTS b
at=$(($(date +%s) + 500))
check OK SET b 1 EXAT $at
check "$at" EXPIRETIME b
check OK SET b 1 PXAT $((at * 1000 + 7))
check "$((at * 1000 + 7))" PEXPIRETIME b
check OK SET b 1 PXAT $((at * 1000 + 500))
check "$((at + 1))" EXPIRETIME b # rounded to the nearest second, as Redis
# The latest time there is: rounded without an overflow (Redis's (ms + 500) / 1000 wraps to a negative
# number, and an UBSan build of kv_server aborted there: a review).
check OK SET b 1 PXAT 9223372036854775807
check 9223372036854776 EXPIRETIME b
check 9223372036854775807 PEXPIRETIME b
check OK SET l x
check 0 SETNX l y
check 1 SETNX m y
check "ERR invalid expire time in 'setex' command" SETEX c 0 v
check "ERR invalid expire time in 'psetex' command" PSETEX c -1 v
check "ERR value is not an integer or out of range" SETEX c x v
check OK SETEX c 10 v
ttl_near 10 c
check OK PSETEX c 20000 v
ttl_near 20 c
check v GETSET c w
check -1 TTL c
check "" GETSET newkey z

# --- EXPIRE and its conditions, TTL, PERSIST.
check 1 PERSIST b
check 0 PERSIST b
check -1 TTL b
check -2 TTL nokey
check -2 PTTL nokey
check -1 EXPIRETIME b
check 0 EXPIRE nokey 10
check 0 EXPIRE c 10 XX
check 1 EXPIRE c 10 NX
check 0 EXPIRE c 10 NX
check 1 EXPIRE c 20 GT
check 0 EXPIRE c 5 GT
check 1 EXPIRE c 5 LT
check 0 EXPIRE c 50 LT
check 1 PERSIST c
check 0 EXPIRE c 50 GT # no expiry counts as the latest time
check 1 EXPIRE c 50 LT
check "ERR NX and XX, GT or LT options at the same time are not compatible" EXPIRE c 10 NX XX
check "ERR GT and LT options at the same time are not compatible" EXPIRE c 10 GT LT
check "ERR Unsupported option FOO" EXPIRE c 10 FOO
check "ERR value is not an integer or out of range" EXPIRE c abc
check "ERR invalid expire time in 'expire' command" EXPIRE c 99999999999999999
check 1 PEXPIRE c 100000
ttl=$(cli PTTL c)
((ttl > 90000 && ttl <= 100000)) || fail "PTTL after PEXPIRE 100000: $ttl"
check 1 EXPIREAT c $(($(date +%s) + 1000))
ttl=$(cli TTL c)
((ttl > 990 && ttl <= 1000)) || fail "TTL after EXPIREAT now+1000: $ttl"
check 1 EXPIRE c -1 # a time past deletes the key
check 0 EXISTS c
check 1 PEXPIREAT l 1
check 0 EXISTS l

# --- GETEX, GETDEL, APPEND, STRLEN, TYPE, UNLINK.
check OK SET g v
check v GETEX g EX 50
ttl_near 50 g
check v GETEX g PERSIST
check -1 TTL g
check v GETEX g PX 30000
ttl_near 30 g
check "ERR syntax error" GETEX g EX 5 PERSIST
check "ERR syntax error" GETEX g FOO
check "ERR invalid expire time in 'getex' command" GETEX g EX 0
check "" GETEX nokey EX 5
check v GETEX g PXAT 1
check 0 EXISTS g
check OK SET g v
check v GETDEL g
check "" GETDEL g
check 5 APPEND d hello
check 1 EXPIRE d 100
check 11 APPEND d " world"
ttl_near 100 d
check "hello world" GET d
check 11 STRLEN d
check 0 STRLEN nokey
check string TYPE d
check none TYPE nokey
check 2 UNLINK d m nokey
check 0 EXISTS d

# --- Keys nobody reads are deleted when their time comes: 10,000 keys of 300 ms, and the number of
# keys falls back to what it was (DBSIZE counts what the stores hold; nothing reads those keys).
base=$(cli DBSIZE)
for ((i = 0; i < 10000; i++)); do printf 'SET exp:%d v PX 300\r\n' "$i"; done | cli --pipe >"$tmp/pipe.out"
grep -q "errors: 0, replies: 10000" "$tmp/pipe.out" || fail "SET PX: $(cat "$tmp/pipe.out")"
wait_keys() { # wait_keys N WHAT: until DBSIZE is N, at most 60 s
    local i
    for ((i = 0; i < 600; i++)); do
        [[ $(cli DBSIZE) == "$1" ]] && return 0
        sleep 0.1 # polling a condition, with a deadline
    done
    fail "$2: DBSIZE stays $(cli DBSIZE), expected $1"
}
wait_keys "$base" "10,000 keys of 300 ms, never read"

# --- An expiry moved sooner is kept by its timer (shard_timer_rearm moves its deadline): 2,000 keys of
# an hour, each then given 300 ms, are gone without a read.
for ((i = 0; i < 2000; i++)); do printf 'SET sooner:%d v EX 3600\r\nPEXPIRE sooner:%d 300\r\n' "$i" "$i"; done |
    cli --pipe >"$tmp/pipe.out"
grep -q "errors: 0, replies: 4000" "$tmp/pipe.out" || fail "SET EX, PEXPIRE: $(cat "$tmp/pipe.out")"
wait_keys "$base" "2,000 keys of an hour moved to 300 ms, never read"

# --- Expiry across membership changes: 2,000 keys of an hour and 2,000 of 3 s; workers are added,
# removed and crashed until the short ones are due; then the short ones must all be gone (DBSIZE),
# without a read, and the long ones hold their values and an hour less the time gone by.
base=$(cli DBSIZE)
short_until=$(($(ms_now) + 3000))
for ((i = 0; i < 2000; i++)); do
    printf 'SET long:%d v%d EX 3600\r\nSET short:%d v PXAT %d\r\n' "$i" "$i" "$i" "$short_until"
done | cli --pipe >"$tmp/pipe.out"
grep -q "errors: 0, replies: 4000" "$tmp/pipe.out" || fail "SETs: $(cat "$tmp/pipe.out")"
workers=(w0 w1)
changes=0
n=0
while (($(ms_now) < short_until + 200)) || ((changes < 6)); do
    kv_churn_step
done
wait_keys $((base + 2000)) "2,000 keys due during $changes membership changes"
for ((i = 0; i < 2000; i += 1000)); do
    args=()
    want=
    for ((j = i; j < i + 1000; j++)); do
        args+=("long:$j")
        want+="v$j"$'\n'
    done
    got=$(cli MGET "${args[@]}")$'\n'
    [[ $got == "$want" ]] || fail "long keys $i.. did not read back after $changes changes"
done
bad=$(for ((i = 0; i < 2000; i += 100)); do cli TTL "long:$i"; done | awk '$1 < 3500 || $1 > 3600' | wc -l)
((bad == 0)) || fail "$bad long keys lost their time to live"
echo "expiry: $changes membership changes; 2,000 due keys gone unread, 2,000 long ones kept"
# --- FLUSHALL while keys wait in the transit area and their timers come due (a hostile review's
# reproducer: the flush of another worker's transit keys raced their timers, a use after free under
# ASan), and while keys with a long time to live wait there: after the flush no key and no timer is
# left (a timer cancelled from a worker that does not hold it kept its record for its whole time).
expect SHUTDOWN OK "$(cli SHUTDOWN)"
wait "$KV_PID" || fail "the server exited with status $?"
KV_LOG=$tmp/server.err kv_start "$server_bin" --workers 4
running() { cli SHARD.STATS | awk -F'[: ]' '/^worker:/ && /state=running/ { print $2 }'; }
n=0
for round in 0 1 2 3 4 5; do
    due=$(($(ms_now) + 1500))
    for ((i = 0; i < 5000; i++)); do
        printf 'SET due:%d v PXAT %d\r\nSET long:%d v EX 100000\r\n' "$i" "$due" "$i"
    done | cli --pipe >"$tmp/pipe.out"
    grep -q "errors: 0, replies: 10000" "$tmp/pipe.out" || fail "SETs: $(cat "$tmp/pipe.out")"
    workers=($(running))
    for victim in "${workers[@]:1}"; do # all but one: their keys go to the transit area
        expect "SHARD.CRASH $victim" OK "$(cli SHARD.CRASH "$victim")"
        expect "SHARD.ADD n$n" OK "$(cli SHARD.ADD "n$n")"
        n=$((n + 1))
    done
    while (($(ms_now) < due - 20 + round * 10)); do :; done # about when the timers come due
    expect "FLUSHALL, round $round" OK "$(cli FLUSHALL)"
    expect "DBSIZE after FLUSHALL" 0 "$(cli DBSIZE)"
done
for ((i = 0; i < 300; i++)); do
    [[ $(cli SHARD.STATS | awk -F: '$1 == "timers" { print $2 }' | tr -d '\r') == 0 ]] && break
    sleep 0.1 # polling a condition, with a deadline
done
expect "timers left after the flushes" 0 "$(cli SHARD.STATS | awk -F: '$1 == "timers" { print $2 }' | tr -d '\r')"
echo "kv_expire_test: passed"
