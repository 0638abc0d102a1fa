#!/usr/bin/env bash
# kv_server: the keyspace and server commands (INFO, SCAN, KEYS, RANDOMKEY, FLUSHDB, MEMORY, CLIENT,
# HELLO, AUTH, CONFIG, COMMAND, TIME) as redis-cli and its --scan, --bigkeys, --memkeys and --stat
# use them, each with its errors; and SCAN's promise: an iteration returns every key present all
# along exactly once while workers are added, removed, crashed and keys placed between its calls, and
# while the balancer moves keys during them.
#
#   kv_admin_test.sh PATH/TO/kv_server
set -euo pipefail
here=$(dirname "$0")
source "$here/../../scripts/kv_common.sh"

server_bin=${1:?usage: kv_admin_test.sh PATH/TO/kv_server}
for tool in redis-cli redis-benchmark stdbuf timeout; do
    command -v "$tool" >/dev/null || { echo "FAIL: $tool not found (Debian packages redis-tools, coreutils)"; exit 1; }
done
kv_test_init
expect_match() { # expect_match WHAT REGEX ACTUAL
    [[ $3 =~ $2 ]] || fail "$1: expected /$2/, got '$3'"
}
restart() { # restart OPTIONS...: a fresh server
    if [[ -n ${KV_PID:-} ]]; then
        kill "$KV_PID"
        wait "$KV_PID" || fail "kv_server did not exit cleanly"
    fi
    KV_LOG=$tmp/server.err kv_start "$server_bin" "$@"
}
cli() { redis-cli -p "$KV_PORT" "$@"; }
load() { # load PREFIX N: keys PREFIX1..PREFIXN, pipelined on one connection
    local i
    for ((i = 1; i <= $2; i++)); do echo "SET $1$i v$i"; done | cli >/dev/null
}

restart --workers 3

# --- INFO: Redis's sections and fields, an empty keyspace left out, and the shard section.
info=$(cli INFO)
for field in redis_version:7.0.0 "tcp_port:$KV_PORT" "process_id:$KV_PID" redis_mode:standalone loading:0 \
             role:master "# Server" "# Clients" "# Memory" "# Persistence" "# Stats" "# Replication" "# CPU" \
             "# Keyspace" "# Shard" epoch:1 workers:3 keys_in_transit:0; do
    grep -qxF "$field"$'\r' <<<"$info" || fail "INFO has no line '$field'"
done
expect_match "INFO used_memory" $'used_memory:[1-9][0-9]*\r' "$(grep '^used_memory:' <<<"$info")"
expect_match "INFO used_memory_human" $'used_memory_human:[0-9.]+[BKMG]\r' "$(grep '^used_memory_human:' <<<"$info")"
# The allocator the binary is linked with (mimalloc when libmimalloc-dev was installed at build).
# Not `ldd | grep -q`: grep's early exit can fail ldd's write, and pipefail then says "not linked".
if [[ $(ldd "$server_bin") == *libmimalloc* ]]; then
    expect_match "INFO mem_allocator" $'mem_allocator:mimalloc-[0-9]+\\.[0-9]+\\.[0-9]+\r' "$(grep '^mem_allocator:' <<<"$info")"
else
    expect "INFO mem_allocator" "mem_allocator:libc" "$(grep '^mem_allocator:' <<<"$info" | tr -d '\r')"
fi
expect_match "INFO connected_clients" $'connected_clients:[1-9]\r' "$(grep '^connected_clients:' <<<"$info")"
expect_match "INFO uptime" $'uptime_in_seconds:[0-9]+\r' "$(grep '^uptime_in_seconds:' <<<"$info")"
expect_match "INFO worker line" $'worker_w0:state=running,keys=0,share=0\\.[0-9]+,queued=[0-9]+,executed=[0-9]+' \
    "$(grep '^worker_w0:' <<<"$info")"
grep -q '^db0:' <<<"$info" && fail "INFO lists db0 while it is empty (Redis leaves it out)"
expect "INFO section" "# Server" "$(cli INFO server | head -1 | tr -d '\r')"
expect "INFO two sections" 2 "$(cli INFO CLIENTS memory | grep -c '^#')"
expect "INFO unknown section" "" "$(cli INFO nosuch)"
load base: 500
expect "INFO keyspace" $'# Keyspace\r\ndb0:keys=500,expires=0,avg_ttl=0\r' "$(cli INFO keyspace)"
commands=$(cli INFO stats | grep '^total_commands_processed:' | tr -dc 0-9)
((commands >= 500)) || fail "INFO total_commands_processed: $commands after 500 SETs"

# --- redis-cli's tools: --stat (INFO every interval), --scan, --bigkeys, --memkeys (SCAN, TYPE,
# STRLEN, MEMORY USAGE).
timeout 2 stdbuf -oL redis-cli -p "$KV_PORT" --stat -i 0.3 >"$tmp/stat" || (($? == 124)) || fail "redis-cli --stat failed"
grep -q '^keys *mem *clients blocked requests *connections' "$tmp/stat" || fail "--stat: no header: $(cat "$tmp/stat")"
grep -qE '^500 +[0-9.]+[BKMG] +[1-9][0-9]* +0 +[0-9]+ \(\+[0-9]+\) +[0-9]+ *$' "$tmp/stat" ||
    fail "--stat: no line with 500 keys: $(cat "$tmp/stat")"
expect "--scan" 500 "$(cli --scan | sort -u | wc -l)"
expect "--scan --pattern" "$(printf 'base:%s\n' {10..19})" "$(cli --scan --pattern 'base:1?' | sort)"
expect "--scan --pattern count" 111 "$(cli --scan --pattern 'base:1*' | wc -l)"
cli --bigkeys >"$tmp/big" 2>&1 || fail "--bigkeys failed: $(cat "$tmp/big")"
grep -q "Sampled 500 keys in the keyspace" "$tmp/big" || fail "--bigkeys: $(cat "$tmp/big")"
grep -q "500 strings with" "$tmp/big" || fail "--bigkeys does not count the strings: $(cat "$tmp/big")"
cli --memkeys >"$tmp/mem" 2>&1 || fail "--memkeys failed: $(cat "$tmp/mem")"
grep -q "Sampled 500 keys in the keyspace" "$tmp/mem" || fail "--memkeys: $(cat "$tmp/mem")"
grep -qE "Biggest string found '\"base:[0-9]+\"' has [1-9][0-9]* bytes" "$tmp/mem" || fail "--memkeys: $(cat "$tmp/mem")"

# --- SCAN, KEYS, RANDOMKEY, DBSIZE, MEMORY and their errors.
expect "KEYS ?" "$(printf 'base:%s\n' {1..9})" "$(cli KEYS 'base:?' | sort)"
expect "KEYS [^...]" base:9 "$(cli KEYS 'base:[^0-8]')"
expect "KEYS [a-b] reversed" "$(printf 'base:%s\n' {20..29})" "$(cli KEYS 'base:[2-2][9-0]' | sort)"
expect "KEYS escape" "" "$(cli KEYS 'base:\*')"
expect "KEYS *" 500 "$(cli KEYS '*' | wc -l)"
# The empty key as redis-server 7.0 matches it: by "*" and "" alone, not by "**" or "*?".
cli SET "" v >/dev/null
expect "KEYS * with the empty key" 501 "$(cli KEYS '*' | wc -l)"
expect "KEYS ** without it" 500 "$(cli KEYS '**' | wc -l)"
expect "KEYS *? without it" 500 "$(cli KEYS '*?' | wc -l)"
expect "SCAN MATCH ** without it" 500 "$(cli SCAN 0 MATCH '**' COUNT 10000 | tail -n +2 | wc -l)"
expect "KEYS '' the empty key alone" 1 "$(cli KEYS '' | wc -l)"
expect "KEYS '' the empty key itself" "" "$(cli KEYS '')"
cli DEL "" >/dev/null
expect "SCAN COUNT 1000" 501 "$(cli SCAN 0 COUNT 1000 | wc -l)"
expect "SCAN COUNT 1000 cursor" 0 "$(cli SCAN 0 COUNT 1000 | head -1)"
expect_match "SCAN COUNT 10 cursor" '^[1-9][0-9]*$' "$(cli SCAN 0 | head -1)"
expect "SCAN MATCH" base:77 "$(cli SCAN 0 MATCH base:77 COUNT 10000 | tail -n +2)"
expect "SCAN TYPE string" 500 "$(cli SCAN 0 TYPE string COUNT 10000 | tail -n +2 | wc -l)"
expect "SCAN TYPE zset" "" "$(cli SCAN 0 TYPE zset COUNT 10000 | tail -n +2)"
expect "SCAN TYPE stream" "" "$(cli SCAN 0 TYPE stream COUNT 10000 | tail -n +2)"
expect "SCAN TYPE unknown (as Redis 7.0: nothing matches)" "" "$(cli SCAN 0 TYPE bogus COUNT 1000000 | tail -n +2)"
expect "SCAN bad cursor" "ERR invalid cursor" "$(cli SCAN x)"
# Cursors as redis-server 7.0 reads them (strtoul): a sign, a minus wrapping; empty is 0.
expect "SCAN cursor -1 (2^64-1)" 0 "$(cli SCAN -1 | head -1)"
expect_match "SCAN cursor -(2^64-1) taken" '^[0-9]+$' "$(cli SCAN -18446744073709551615 COUNT 3 | head -1)"
expect "SCAN cursor -(2^64-1) is 1" "$(cli SCAN 1 COUNT 3)" "$(cli SCAN -18446744073709551615 COUNT 3)"
expect "SCAN cursor +0" 501 "$(cli SCAN +0 COUNT 1000 | wc -l)"
expect "SCAN empty cursor (0)" 501 "$(cli SCAN '' COUNT 1000 | wc -l)"
for c in - + " 5" "5 " -18446744073709551616 +-1 0x1; do
    expect "SCAN cursor '$c'" "ERR invalid cursor" "$(cli SCAN "$c")"
done
expect "SCAN cursor past 2^64" "ERR invalid cursor" "$(cli SCAN 18446744073709551616)"
expect "SCAN cursor 2^64-1" 0 "$(cli SCAN 18446744073709551615 | head -1)"
expect "SCAN COUNT 0" "ERR syntax error" "$(cli SCAN 0 COUNT 0)"
expect "SCAN COUNT x" "ERR value is not an integer or out of range" "$(cli SCAN 0 COUNT x)"
expect "SCAN option without value" "ERR syntax error" "$(cli SCAN 0 MATCH)"
expect "SCAN unknown option" "ERR syntax error" "$(cli SCAN 0 FOO 1)"
expect "SCAN no cursor" "ERR wrong number of arguments for 'scan' command" "$(cli SCAN)"
expect "KEYS no pattern" "ERR wrong number of arguments for 'keys' command" "$(cli KEYS)"
expect_match "RANDOMKEY" '^base:[0-9]+$' "$(cli RANDOMKEY)"
expect "DBSIZE" 500 "$(cli DBSIZE)"
expect_match "MEMORY USAGE" '^[1-9][0-9]*$' "$(cli MEMORY USAGE base:1)"
expect_match "MEMORY USAGE SAMPLES" '^[1-9][0-9]*$' "$(cli MEMORY USAGE base:1 SAMPLES 5)"
expect "MEMORY USAGE missing key" "" "$(cli MEMORY USAGE nokey)"
expect "MEMORY USAGE bad SAMPLES" "ERR syntax error" "$(cli MEMORY USAGE base:1 FOO 5)"
expect "MEMORY USAGE no key" "ERR wrong number of arguments for 'memory|usage' command" "$(cli MEMORY USAGE)"
expect "MEMORY unknown" "ERR unknown subcommand 'FOO'. Try MEMORY HELP." "$(cli MEMORY FOO)"

# --- FLUSHDB, FLUSHALL: every worker's keys and those in transit (a crash evacuates a worker's keys
# there until they are used).
expect "FLUSHDB bad" "ERR syntax error" "$(cli FLUSHDB NOW)"
# A worker's name with a NUL byte is refused (shard takes names as C strings: it named "zz").
exec {nulfd}<>"/dev/tcp/127.0.0.1/$KV_PORT"
printf '*2\r\n$9\r\nSHARD.ADD\r\n$3\r\nzz\0\r\n*2\r\n$12\r\nSHARD.REMOVE\r\n$3\r\nw0\0\r\n' >&"$nulfd"
for what in ADD REMOVE; do
    IFS= read -r -t 10 -u "$nulfd" line || fail "SHARD.$what of a name with a NUL byte: no reply"
    expect "SHARD.$what of a name with a NUL byte" $'-ERR a worker\'s name may not hold a NUL byte\r' "$line"
done
exec {nulfd}>&-
[[ $(cli INFO shard) != *zz* ]] || fail "a worker named zz was added"
cli SHARD.ADD w3 >/dev/null
cli SHARD.CRASH w0 >/dev/null
(($(cli INFO shard | grep '^keys_in_transit:' | tr -dc 0-9) > 0)) || fail "a crash left nothing in transit"
expect "FLUSHDB" OK "$(cli FLUSHDB)"
expect "DBSIZE after FLUSHDB" 0 "$(cli DBSIZE)"
expect "KEYS after FLUSHDB" "" "$(cli KEYS '*')"
expect "transit after FLUSHDB" $'keys_in_transit:0\r' "$(cli INFO shard | grep '^keys_in_transit:')"
expect "RANDOMKEY empty" "" "$(cli RANDOMKEY)"
expect "SCAN empty" 0 "$(cli SCAN 0 | head -1)"
load x: 10
expect "FLUSHALL ASYNC" OK "$(cli FLUSHALL ASYNC)"
expect "DBSIZE after FLUSHALL" 0 "$(cli DBSIZE)"
expect "FLUSHDB SYNC" OK "$(cli FLUSHDB SYNC)"
# In one write: the SETs before a FLUSHDB reach their workers before it (a read's keyed commands go to
# shard together, and before an admin command), so the GETs after it find nothing.
exec {sock}<>"/dev/tcp/127.0.0.1/$KV_PORT"
req= want=
for ((i = 0; i < 100; i++)); do req+="SET flush:$i v"$'\r\n' want+=$'+OK\n'; done
req+=$'FLUSHDB\r\n' want+=$'+OK\n'
for ((i = 0; i < 100; i++)); do req+="GET flush:$i"$'\r\n' want+=$'$-1\n'; done
printf '%s' "$req" >&"$sock"
read_lines "$sock" 201 "pipelined FLUSHDB"
[[ $GOT_LINES == "$want" ]] || fail "pipelined SETs, FLUSHDB, GETs: a GET found a key set before the FLUSHDB"
# The same for commands of several keys, whose steps run once all their keys are held, after their
# parts were queued: an MSET over the workers and a MULTI pipelined before a FLUSHALL are done before
# it (they were not: the flush's job on a worker could come before their steps there, and 61-87 of 100
# such rounds left keys behind).
for ((round = 0; round < 20; round++)); do
    req="MSET" want=$'+OK\n'
    for ((i = 0; i < 32; i++)); do req+=" m:$i v"; done
    req+=$'\r\nMULTI\r\n' want+=$'+OK\n'
    for ((i = 0; i < 8; i++)); do req+="SET t:$i v"$'\r\n' want+=$'+QUEUED\n'; done
    req+=$'EXEC\r\n' want+=$'*8\n'
    for ((i = 0; i < 8; i++)); do want+=$'+OK\n'; done
    req+=$'FLUSHALL\r\nEXISTS' want+=$'+OK\n:0\n'
    for ((i = 0; i < 32; i++)); do req+=" m:$i"; done
    for ((i = 0; i < 8; i++)); do req+=" t:$i"; done
    printf '%s\r\n' "$req" >&"$sock"
    read_lines "$sock" 21 "MSET, MULTI, FLUSHALL, EXISTS"
    [[ $GOT_LINES == "$want" ]] || fail "round $round: an MSET or MULTI pipelined before a FLUSHALL left keys: $GOT_LINES"
done
# The rest of a pipeline in a later write, while the FLUSHDB may still run: the SET after it stays,
# and a KEYS after the SET sees it.
printf 'FLUSHDB\r\nSET after:flush v\r\n' >&"$sock"
printf 'GET after:flush\r\nKEYS *\r\n' >&"$sock"
read_lines "$sock" 7 "FLUSHDB then SET, GET, KEYS"
exec {sock}>&-
expect "FLUSHDB then SET, GET, KEYS" $'+OK\n+OK\n$1\nv\n*1\n$11\nafter:flush\n' "$GOT_LINES"

# --- TIME, COMMAND, CONFIG.
mapfile -t t < <(cli TIME)
now=$(date +%s)
((t[0] >= now - 5 && t[0] <= now + 5 && t[1] >= 0 && t[1] < 1000000)) || fail "TIME: ${t[*]} (now $now)"
count=$(cli COMMAND COUNT)
((count > 30)) || fail "COMMAND COUNT: $count"
expect "COMMAND LIST" "$count" "$(cli COMMAND LIST | wc -l)"
cli COMMAND LIST | grep -qx scan || fail "COMMAND LIST has no scan"
expect "COMMAND DOCS" "" "$(cli COMMAND DOCS)"
expect "COMMAND INFO get" "get 2 readonly 1 1 1" "$(cli COMMAND INFO get | grep . | head -6 | tr '\n' ' ' | sed 's/ $//')"
expect "COMMAND INFO set" "set -3 write 1 1 1" "$(cli COMMAND INFO set | grep . | head -6 | tr '\n' ' ' | sed 's/ $//')"
# A keyed command says whether it only reads, as redis-server 7.0's flags say among others.
for c in get mget hgetall smembers zrange zscan ttl exists strlen lrange; do
    expect "COMMAND INFO $c flag" readonly "$(cli COMMAND INFO "$c" | sed -n 3p)"
done
for c in set mset del incr lpush hset sadd zadd expire rename smove getdel; do
    expect "COMMAND INFO $c flag" write "$(cli COMMAND INFO "$c" | sed -n 3p)"
done
expect "COMMAND INFO unknown" "" "$(cli COMMAND INFO nosuch)"
expect "COMMAND unknown" "ERR unknown subcommand 'FOO'. Try COMMAND HELP." "$(cli COMMAND FOO)"
expect "CONFIG GET two" $'save\n\nappendonly\nno' "$(cli CONFIG GET save appendonly)"
expect "CONFIG GET databases" $'databases\n1' "$(cli CONFIG GET databases)"
expect "CONFIG GET port" "$KV_PORT" "$(cli CONFIG GET port | tail -1)"
expect "CONFIG GET workers" $'workers\n3' "$(cli CONFIG GET WORKERS)"
expect "CONFIG GET glob" $'maxmemory\nmaxmemory-policy' "$(cli CONFIG GET 'maxmemory*' | sed -n '1p;3p')"
expect "CONFIG GET nothing" "" "$(cli CONFIG GET nosuch)"
expect "CONFIG GET no pattern" "ERR wrong number of arguments for 'config|get' command" "$(cli CONFIG GET)"
expect "CONFIG SET same" OK "$(cli CONFIG SET save '' appendonly no)"
expect "CONFIG SET fixed" \
    "ERR CONFIG SET failed (possibly related to argument 'maxmemory') - kv_server cannot change it at runtime" \
    "$(cli CONFIG SET maxmemory 100mb)"
expect "CONFIG SET unknown" "ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'" \
    "$(cli CONFIG SET nosuch 1)"
expect "CONFIG SET odd" "ERR wrong number of arguments for 'config|set' command" "$(cli CONFIG SET save)"
before=$(cli INFO stats | grep '^total_commands_processed:' | tr -dc 0-9)
expect "CONFIG RESETSTAT" OK "$(cli CONFIG RESETSTAT)"
# Counted by each network loop: the reset takes every loop's count off (what it ran since is the INFO).
after=$(cli INFO stats | grep '^total_commands_processed:' | tr -dc 0-9)
((before >= 500 && after <= 2)) || fail "total_commands_processed: $before before CONFIG RESETSTAT, $after after"
expect "CONFIG REWRITE" "ERR The server is running without a config file" "$(cli CONFIG REWRITE)"
expect "CONFIG unknown" "ERR unknown subcommand 'FOO'. Try CONFIG HELP." "$(cli CONFIG FOO)"

# --- CLIENT and HELLO, on one connection (redis-cli reads commands from stdin on one connection).
# (redis-cli prints a blank line after an error there: the errors are checked on their own.)
out=$(printf '%s\n' 'CLIENT GETNAME' 'CLIENT SETNAME tester' 'CLIENT GETNAME' 'CLIENT SETINFO LIB-NAME mylib' \
    'CLIENT SETINFO LIB-VER 1.2' 'CLIENT INFO' 'CLIENT SETNAME ""' 'CLIENT GETNAME' 'CLIENT ID' \
    'HELLO 2 SETNAME viahello' 'CLIENT GETNAME' | cli)
mapfile -t o <<<"$out"
expect "CLIENT GETNAME unset" "" "${o[0]}"
expect "CLIENT SETNAME" OK "${o[1]}"
expect "CLIENT GETNAME" tester "${o[2]}"
expect "CLIENT SETINFO" "OK OK" "${o[3]} ${o[4]}"
expect_match "CLIENT INFO" '^id=[0-9]+ addr=127\.0\.0\.1:[0-9]+ laddr=127\.0\.0\.1:[0-9]+ fd=[0-9]+ name=tester .* lib-name=mylib lib-ver=1\.2 resp=2$' "${o[5]}"
expect "CLIENT SETNAME empty" "OK " "${o[6]} ${o[7]}"
expect_match "CLIENT ID" '^[1-9][0-9]*$' "${o[8]}"
expect "HELLO 2 reply" "server redis version 7.0.0 proto 2 id ${o[8]} mode standalone role master modules " \
    "$(printf '%s ' "${o[@]:9:14}" | sed 's/ $//')"
expect "HELLO SETNAME" viahello "${o[23]}"
expect "CLIENT SETNAME space" "ERR Client names cannot contain spaces, newlines or special characters." \
    "$(cli CLIENT SETNAME 'bad name')"
expect "CLIENT SETINFO unknown" "ERR Unrecognized option 'FOO'" "$(cli CLIENT SETINFO FOO x)"
expect "CLIENT SETINFO bad" "ERR lib-name cannot contain spaces, newlines or special characters." \
    "$(cli CLIENT SETINFO lib-name 'a b')"
mapfile -t ids < <(printf '%s\n' 'CLIENT SETNAME listed' 'CLIENT ID' 'CLIENT LIST' | cli)
grep -q "^id=${ids[1]} .* name=listed .*cmd=client" <<<"$(printf '%s\n' "${ids[@]:2}")" ||
    fail "CLIENT LIST does not show the connection: ${ids[*]}"
expect "CLIENT LIST ID" "" "$(cli CLIENT LIST ID 99999)"
expect "CLIENT LIST bad ID" "ERR Invalid client ID" "$(cli CLIENT LIST ID x)"
expect "CLIENT LIST TYPE pubsub" "" "$(cli CLIENT LIST TYPE pubsub)"
expect "CLIENT LIST TYPE bad" "ERR Unknown client type 'x'" "$(cli CLIENT LIST TYPE x)"
expect "CLIENT unknown" "ERR unknown subcommand 'FOO'. Try CLIENT HELP." "$(cli CLIENT FOO)"
expect "CLIENT SETNAME count" "ERR wrong number of arguments for 'client|setname' command" "$(cli CLIENT SETNAME)"
expect "CLIENT KILL" "ERR CLIENT KILL is not supported by kv_server" "$(cli CLIENT KILL 1.2.3.4:5)"
expect "HELLO 3" "NOPROTO sorry, this protocol version is not supported (kv_server speaks RESP2)" "$(cli HELLO 3)"
expect "HELLO x" "ERR Protocol version is not an integer or out of range" "$(cli HELLO x)"
expect "HELLO bad option" "ERR Syntax error in HELLO option 'FOO'" "$(cli HELLO 2 FOO)"
expect "AUTH without a password" \
    "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?" \
    "$(cli AUTH x)"
expect "AUTH default without a password" OK "$(cli AUTH default x)"

# --- SCAN across membership changes: an iteration started before workers are added, removed and
# crashed and keys placed (between its calls, by SHARD.*) returns every key exactly once, while
# redis-benchmark adds other keys (each returned at most once).
cli FLUSHDB >/dev/null
load base: 3000
redis-benchmark -p "$KV_PORT" -t set -r 10000 -n 100000000 -c 4 -P 16 -q >/dev/null 2>&1 &
bench_pid=$!
kv_extra_pids=("$bench_pid")
changes=("SHARD.ADD w4" "SHARD.CRASH w1" "SHARD.REMOVE w2" "SHARD.ADD w5 3" "SHARD.PLACE base:17 w5"
         "SHARD.CRASH w3" "SHARD.ADD w6" "SHARD.REMOVE w4" "SHARD.UNPLACE base:17" "SHARD.CRASH w5"
         "SHARD.ADD w7" "SHARD.ADD w8 2" "SHARD.REMOVE w6")
cursor=0
calls=0
: >"$tmp/scanned"
while :; do
    mapfile -t page < <(cli SCAN "$cursor" COUNT 60)
    [[ ${page[0]} =~ ^[0-9]+$ ]] || fail "SCAN $cursor during changes: ${page[*]}"
    cursor=${page[0]}
    printf '%s\n' "${page[@]:1}" | grep . >>"$tmp/scanned" || true
    if ((calls < ${#changes[@]})); then
        expect "${changes[calls]}" OK "$(cli ${changes[calls]})"
    fi
    calls=$((calls + 1))
    [[ $cursor == 0 ]] && break
done
kill "$bench_pid"
wait "$bench_pid" 2>/dev/null || true
kv_extra_pids=()
((calls > ${#changes[@]})) || fail "SCAN ended after $calls calls, before every change was made"
dups=$(sort "$tmp/scanned" | uniq -d | head -5)
[[ -z $dups ]] || fail "SCAN returned keys twice: $dups"
missing=$(comm -23 <(printf 'base:%s\n' $(seq 1 3000) | sort) <(grep '^base:' "$tmp/scanned" | sort) | head -5)
[[ -z $missing ]] || fail "SCAN across changes missed keys: $missing"
drains=$(cli INFO shard | grep '^scan_drains:' | tr -dc 0-9)
((drains >= ${#changes[@]})) || fail "SCAN drained $drains times for ${#changes[@]} ring changes"
echo "scan across changes: $calls calls, $(wc -l <"$tmp/scanned") keys, every base key once"

# --- SCAN while the balancer moves keys: changes may come during a slice (the slice is read again).
restart --workers 3 --balance-ms 20 --hot-keys 8
load base: 3000
redis-benchmark -p "$KV_PORT" -t incr -r 4 -n 100000000 -c 8 -P 32 -q >/dev/null 2>&1 &
bench_pid=$!
kv_extra_pids=("$bench_pid")
sleep 0.5
for round in 1 2 3; do
    cli --scan >"$tmp/scanned" || fail "--scan under the balancer failed: $(tail -1 "$tmp/scanned")"
    dups=$(sort "$tmp/scanned" | uniq -d | head -5)
    [[ -z $dups ]] || fail "SCAN under the balancer returned keys twice: $dups"
    expect "SCAN under the balancer, round $round" 3000 "$(grep -c '^base:' "$tmp/scanned")"
done
kill "$bench_pid"
wait "$bench_pid" 2>/dev/null || true
kv_extra_pids=()
echo "balancer: $(cli INFO shard | grep -E '^(epoch|balance_moves|scan_drains|scan_rereads):' | tr -d '\r' | tr '\n' ' ')"

# --- AUTH: --requirepass, as Redis's default user's password.
restart --workers 2 --requirepass 's3cret pass'
expect "NOAUTH" "NOAUTH Authentication required." "$(cli PING)"
expect "NOAUTH INFO" "NOAUTH Authentication required." "$(cli INFO)"
expect "unknown command before AUTH" "ERR unknown command 'NOSUCH'" "$(cli NOSUCH | cut -d, -f1)"
expect "AUTH wrong" "WRONGPASS invalid username-password pair or user is disabled." "$(cli AUTH wrong)"
expect "AUTH wrong user" "WRONGPASS invalid username-password pair or user is disabled." "$(cli AUTH admin 's3cret pass')"
expect "AUTH too many" "ERR syntax error" "$(cli AUTH a b c)"
expect "AUTH then PING" $'OK\nPONG' "$(printf '%s\n' 'AUTH "s3cret pass"' PING | cli)"
expect "AUTH user then PING" $'OK\nPONG' "$(printf '%s\n' 'AUTH default "s3cret pass"' PING | cli)"
expect "-a" PONG "$(cli -a 's3cret pass' --no-auth-warning PING)"
expect "--user -a" PONG "$(cli --user default -a 's3cret pass' --no-auth-warning PING)"
expect "HELLO unauthenticated" "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time" \
    "$(cli HELLO 2)"
expect "HELLO AUTH" $'proto\n2\nPONG' "$(printf '%s\n' 'HELLO 2 AUTH default "s3cret pass"' PING | cli | sed -n '5,6p;15p')"
expect "HELLO AUTH wrong" "WRONGPASS invalid username-password pair or user is disabled." "$(cli HELLO 2 AUTH default x)"
expect "QUIT unauthenticated" OK "$(cli QUIT)"
expect "CONFIG GET requirepass" $'requirepass\ns3cret pass' "$(cli -a 's3cret pass' --no-auth-warning CONFIG GET requirepass)"
expect "CONFIG SET requirepass" OK "$(cli -a 's3cret pass' --no-auth-warning CONFIG SET requirepass new)"
expect "new password" PONG "$(cli -a new --no-auth-warning PING)"
expect "old password" "WRONGPASS invalid username-password pair or user is disabled." "$(cli AUTH 's3cret pass')"
# A connection that has not authenticated while the password goes is let in, as Redis does.
exec {early}<>"/dev/tcp/127.0.0.1/$KV_PORT"
printf 'PING\r\n' >&"$early"
IFS= read -r -t 10 -u "$early" line || fail "no reply to an early connection's PING"
expect "PING before the password goes" $'-NOAUTH Authentication required.\r' "$line"
expect "password removed" OK "$(cli -a new --no-auth-warning CONFIG SET requirepass '')"
expect "no password" PONG "$(cli PING)"
printf 'PING\r\n' >&"$early"
IFS= read -r -t 10 -u "$early" line || fail "no reply to an early connection's PING"
expect "PING on that connection after" $'+PONG\r' "$line"
exec {early}>&-
# A password is a C string of at most 255 bytes: one with a NUL byte (it would open to its prefix) or
# longer is refused, as is the same parameter twice.
exec {fd}<>"/dev/tcp/127.0.0.1/$KV_PORT"
printf '*4\r\n$6\r\nCONFIG\r\n$3\r\nSET\r\n$11\r\nrequirepass\r\n$5\r\nab\0cd\r\n' >&"$fd"
IFS= read -r -t 10 -u "$fd" line || fail "no reply to CONFIG SET requirepass with a NUL"
[[ $line == "-ERR CONFIG SET failed"*"without NUL"* ]] || fail "CONFIG SET requirepass with a NUL: $line"
exec {fd}>&-
expect "still no password" PONG "$(cli PING)"
[[ $(cli CONFIG SET requirepass "$(head -c 256 /dev/zero | tr '\0' p)") == "ERR CONFIG SET failed"* ]] ||
    fail "CONFIG SET requirepass of 256 bytes was taken"
expect "CONFIG SET requirepass twice" "ERR CONFIG SET failed - duplicate parameter 'requirepass'" \
    "$(cli CONFIG SET requirepass a requirepass b)"

echo "kv_admin_test: passed"
