#!/usr/bin/env bash
# kv_server: lists, hashes, sets and sorted sets: each command, its errors and WRONGTYPE, byte for byte
# as Redis 7.0 answers them; empty collections deleted; redis-benchmark's default suite; collections
# surviving workers added, removed and crashed.
#
#   kv_types_test.sh PATH/TO/kv_server
#   KV_TYPES_PORT=N kv_types_test.sh   runs only the reply checks, against a server already listening
#                                      on port N: a real redis-server, to check the expectations
set -euo pipefail
export LC_ALL=C # ${#s} counts bytes
here=$(dirname "$0")
source "$here/../../scripts/kv_common.sh"

kv_test_init

if [[ -n ${KV_TYPES_PORT:-} ]]; then
    KV_PORT=$KV_TYPES_PORT
else
    server_bin=${1:?usage: kv_types_test.sh PATH/TO/kv_server}
    KV_LOG=$tmp/server.err kv_start "$server_bin" --workers 2
fi
cli() { redis-cli -p "$KV_PORT" "$@"; }

# A RESP connection of our own, to see replies exactly: redis-cli shows a nil, an empty array and a
# null array alike. q prints a reply on one line, each RESP line of it followed by '|'.
exec {resp_fd}<>"/dev/tcp/127.0.0.1/$KV_PORT"
read_reply() {
    local line i
    IFS= read -r -t 10 -u "$resp_fd" line || fail "no reply"
    line=${line%$'\r'}
    reply+="$line|"
    case $line in
    '$'-* | '*'-*) ;;
    '$'*)
        IFS= read -r -t 10 -u "$resp_fd" line || fail "no bulk string"
        reply+="${line%$'\r'}|"
        ;;
    '*'*) for ((i = 0; i < ${line:1}; i++)); do read_reply; done ;;
    esac
}
q() {
    local s="*$#"$'\r\n' a reply=
    for a; do s+="\$${#a}"$'\r\n'"$a"$'\r\n'; done
    printf '%s' "$s" >&"$resp_fd"
    read_reply
    printf '%s\n' "$reply"
}
is() { # is EXPECTED COMMAND ARGS...
    local want=$1
    shift
    expect "$*" "$want" "$(q "$@")"
}
WRONGTYPE='-WRONGTYPE Operation against a key holding the wrong kind of value|'
NOTINT='-ERR value is not an integer or out of range|'
RANGE='-ERR value is out of range, must be positive|'
SYNTAX='-ERR syntax error|'
arity() { echo "-ERR wrong number of arguments for '$1' command|"; }
is_arity() { # is_arity NAME COMMAND ARGS...: the arity error, naming the command in lower case
    local name=$1
    shift
    expect "$*" "$(arity "$name")" "$(q "$@")"
}

q DEL t:s t:l t:h t:set t:z t:z2 t:nol t:noh t:noset t:noz >/dev/null
is '+OK|' SET t:s v

# --- Lists
is ':3|' RPUSH t:l a b c
is ':5|' LPUSH t:l y z
is '*5|$1|z|$1|y|$1|a|$1|b|$1|c|' LRANGE t:l 0 -1
is '*2|$1|b|$1|c|' LRANGE t:l -2 100
is '*5|$1|z|$1|y|$1|a|$1|b|$1|c|' LRANGE t:l -100 100
is '*0|' LRANGE t:l 3 1
is '*0|' LRANGE t:l 5 10
is '*0|' LRANGE t:nol 0 -1
is "$NOTINT" LRANGE t:l 0 x
is "$NOTINT" LRANGE t:s 0 x
is "$WRONGTYPE" LRANGE t:s 0 1
is ':5|' LLEN t:l
is ':0|' LLEN t:nol
is '$1|y|' LINDEX t:l 1
is '$1|c|' LINDEX t:l -1
is '$-1|' LINDEX t:l 5
is '$-1|' LINDEX t:l -6
is "$NOTINT" LINDEX t:l x
is '$-1|' LINDEX t:nol x
is "$WRONGTYPE" LINDEX t:s x
is '$1|z|' LPOP t:l
is '$1|c|' RPOP t:l
is '*0|' LPOP t:l 0
is '*2|$1|y|$1|a|' LPOP t:l 2
is '$-1|' LPOP t:nol
is '*-1|' LPOP t:nol 2
is '*-1|' RPOP t:nol 0
is "$RANGE" LPOP t:l -1
is "$RANGE" LPOP t:l 1.5
is "$RANGE" LPOP t:nol -1
is "$RANGE" RPOP t:s -1
is "$(arity lpop)" LPOP t:l 1 2
is "$(arity rpop)" RPOP t:l 1 2
is_arity lpush LPUSH t:l
is "$WRONGTYPE" LPUSH t:s a
is "$WRONGTYPE" RPUSH t:s a
is "$WRONGTYPE" LPOP t:s
is "$WRONGTYPE" RPOP t:s 1
is "$WRONGTYPE" LLEN t:s
is '*1|$1|b|' RPOP t:l 10
is ':0|' EXISTS t:l
big=$(printf 'x%.0s' {1..3000}) # sent by reference rather than copied
is ':2|' RPUSH t:l "$big" small
# A range with large elements among small ones: sent by reference between copied ones, whole and in
# order, whether the indexes bound the reply (both from the head or the tail) or not.
is ':4|' RPUSH t:big a "$big" b "$big"
want="*4|\$1|a|\$3000|$big|\$1|b|\$3000|$big|"
is "$want" LRANGE t:big 0 3
is "$want" LRANGE t:big -4 -1
is "$want" LRANGE t:big 0 -1
is "*2|\$3000|$big|\$1|b|" LRANGE t:big 1 2
is ':1|' DEL t:big
is "\$3000|$big|" LINDEX t:l 0
is "\$3000|$big|" LPOP t:l
is '$5|small|' RPOP t:l
is ':0|' EXISTS t:l

# --- Hashes
is ':2|' HSET t:h a 1 b 2
is ':1|' HSET t:h a 3 c 4
is '+OK|' HMSET t:h d 5
is_arity hset HSET t:h a
is "$(arity hset)" HSET t:h a 1 b
is_arity hmset HMSET t:h a
is "$WRONGTYPE" HSET t:s a 1
is "$WRONGTYPE" HMSET t:s a 1
is '$1|3|' HGET t:h a
is '$-1|' HGET t:h zz
is '$-1|' HGET t:noh a
is "$WRONGTYPE" HGET t:s a
is '*3|$1|3|$-1|$1|4|' HMGET t:h a zz c
is '*1|$-1|' HMGET t:noh a
is "$WRONGTYPE" HMGET t:s a
is_arity hmget HMGET t:h
is ':1|' HEXISTS t:h a
is ':0|' HEXISTS t:h q
is ':0|' HEXISTS t:noh q
is "$WRONGTYPE" HEXISTS t:s a
is ':4|' HLEN t:h
is ':0|' HLEN t:noh
is "$WRONGTYPE" HLEN t:s
expect "HGETALL" "a 3|b 2|c 4|d 5|" "$(cli HGETALL t:h | paste -d ' ' - - | sort | tr '\n' '|')"
is '*0|' HGETALL t:noh
is "$WRONGTYPE" HGETALL t:s
is ':1|' HSET t:h big "$big"
is "\$3000|$big|" HGET t:h big
is ':2|' HDEL t:h a q big
is ':0|' HDEL t:noh a
is "$WRONGTYPE" HDEL t:s a
is ':3|' HDEL t:h b c d
is ':0|' EXISTS t:h

# --- Sets
is ':2|' SADD t:set a b a
is ':1|' SADD t:set a b c
is "$WRONGTYPE" SADD t:s a
is ':1|' SISMEMBER t:set a
is ':0|' SISMEMBER t:set z
is ':0|' SISMEMBER t:noset a
is "$WRONGTYPE" SISMEMBER t:s a
is ':3|' SCARD t:set
is ':0|' SCARD t:noset
is "$WRONGTYPE" SCARD t:s
expect "SMEMBERS" "a|b|c|" "$(cli SMEMBERS t:set | sort | tr '\n' '|')"
is '*0|' SMEMBERS t:noset
is "$WRONGTYPE" SMEMBERS t:s
is ':1|' SREM t:set a z
is ':0|' SREM t:noset a
is "$WRONGTYPE" SREM t:s a
is_arity srem SREM t:set
is '$-1|' SPOP t:noset
is '*0|' SPOP t:noset 2
is '*0|' SPOP t:noset 0
is '*0|' SPOP t:set 0
is "$RANGE" SPOP t:set -1
is "$RANGE" SPOP t:set x
is "$RANGE" SPOP t:s -1
is "$SYNTAX" SPOP t:set 1 2
is "$WRONGTYPE" SPOP t:s
popped=$(cli SPOP t:set)
[[ $popped == b || $popped == c ]] || fail "SPOP answered '$popped'"
is ':1|' SCARD t:set
is ':0|' SISMEMBER t:set "$popped"
is ':3|' SADD t:set x y z
rest=b
[[ $popped == b ]] && rest=c
expect "SPOP of all" "$rest|x|y|z|" "$(cli SPOP t:set 10 | sort | tr '\n' '|')"
is ':0|' EXISTS t:set
is ':3|' SADD t:set a b c
[[ $(q SPOP t:set 2) == '*2|$1|'?'|$1|'?'|' ]] || fail "SPOP t:set 2"
is ':1|' SCARD t:set
q DEL t:set >/dev/null

# --- Sorted sets: scores as Redis writes them
is ':8|' ZADD t:z 0.1 a 1.5 b 3 c inf d -inf e 1e20 f 1e-5 g 123456789012345678 h
is '*16|$1|e|$4|-inf|$1|g|$22|1.0000000000000001e-05|$1|a|$19|0.10000000000000001|$1|b|$3|1.5|$1|c|$1|3|$1|h|$22|1.2345678901234568e+17|$1|f|$5|1e+20|$1|d|$3|inf|' ZRANGE t:z 0 -1 WITHSCORES
is '*3|$1|e|$1|g|$1|a|' ZRANGE t:z 0 2
is '*4|$1|d|$3|inf|$1|f|$5|1e+20|' ZRANGE t:z 0 1 REV WITHSCORES
is '*2|$1|a|$1|g|' ZRANGE t:z -3 -2 rev
is '*0|' ZRANGE t:z 5 2
is '*0|' ZRANGE t:noz 0 -1
is "$SYNTAX" ZRANGE t:z 0 1 foo
is "$SYNTAX" ZRANGE t:s 0 1 foo
is "$NOTINT" ZRANGE t:z x 1
is "$WRONGTYPE" ZRANGE t:s 0 1 WITHSCORES
is '$3|1.5|' ZSCORE t:z b
is '$3|inf|' ZSCORE t:z d
is '$-1|' ZSCORE t:z nope
is '$-1|' ZSCORE t:noz a
is "$WRONGTYPE" ZSCORE t:s a
is ':8|' ZCARD t:z
is ':0|' ZCARD t:noz
is "$WRONGTYPE" ZCARD t:s
is '-ERR value is not a valid float|' ZADD t:z nan x
is '-ERR value is not a valid float|' ZADD t:z abc x
is '-ERR value is not a valid float|' ZADD t:z 1e400 x
is '-ERR value is not a valid float|' ZADD t:z ' 1' x
is '-ERR value is not a valid float|' ZADD t:z '1 ' x
is '-ERR value is not a valid float|' ZADD t:z '' x
is '-ERR value is not a valid float|' ZADD t:s x a
is_arity zadd ZADD t:z 1
is_arity zadd ZADD t:z nx
is "$SYNTAX" ZADD t:z 1 a 2
is '-ERR XX and NX options at the same time are not compatible|' ZADD t:z xx nx 1 a
is '-ERR GT, LT, and/or NX options at the same time are not compatible|' ZADD t:z gt lt 1 a
is '-ERR GT, LT, and/or NX options at the same time are not compatible|' ZADD t:z nx gt 1 a
is '-ERR INCR option supports a single increment-element pair|' ZADD t:z incr 1 a 2 b
is "$WRONGTYPE" ZADD t:s 1 a
is ':0|' ZADD t:z 0x10 a
is '$2|16|' ZSCORE t:z a
is ':0|' ZADD t:z -0 a
is '$1|0|' ZSCORE t:z a
is '$18|1.1000000000000001|' ZADD t:z incr 1.1 a
is '$3|inf|' ZADD t:z INCR inf a
is '-ERR resulting score is not a number (NaN)|' ZADD t:z incr -inf a
is '$3|inf|' ZADD t:z incr 0 a
is ':2|' ZADD t:z ch 2 a 1 b
is ':0|' ZADD t:z xx 5 q
is '$-1|' ZADD t:z nx incr 1 a
is '$-1|' ZADD t:z xx incr 1 q
is ':0|' ZADD t:z gt 1 a
is ':1|' ZADD t:z gt ch 3 a
is ':0|' ZADD t:z lt ch 4 a
is ':1|' ZADD t:z lt ch 0.5 a
is ':1|' ZADD t:z nx 7 a 7 new
is '$3|0.5|' ZSCORE t:z a
is ':0|' ZADD t:noz xx 1 a
is '$-1|' ZADD t:noz xx incr 1 a
is ':0|' EXISTS t:noz
is ':2|' ZREM t:z a new nope
is ':0|' ZREM t:noz a
is "$WRONGTYPE" ZREM t:s a
is '*0|' ZPOPMIN t:noz
is '*0|' ZPOPMIN t:noz 3
is '*0|' ZPOPMIN t:z 0
is "$RANGE" ZPOPMIN t:z -1
is "$RANGE" ZPOPMIN t:s -1
is "$SYNTAX" ZPOPMIN t:z 1 2
is "$WRONGTYPE" ZPOPMIN t:s
is '*2|$1|e|$4|-inf|' ZPOPMIN t:z
is '*4|$1|g|$22|1.0000000000000001e-05|$1|b|$1|1|' ZPOPMIN t:z 2
is '*8|$1|c|$1|3|$1|h|$22|1.2345678901234568e+17|$1|f|$5|1e+20|$1|d|$3|inf|' ZPOPMIN t:z 10
is ':0|' EXISTS t:z
is ':1|' ZADD t:z 1 only
is ':1|' ZREM t:z only
is ':0|' EXISTS t:z
is ':3|' ZADD t:z 1 b 1 a 1 ab
is '*3|$1|a|$2|ab|$1|b|' ZRANGE t:z 0 -1
q DEL t:z >/dev/null

# --- WRONGTYPE the other way: string commands on collections
is ':1|' LPUSH t:l a
is ':1|' HSET t:h a 1
is ':1|' SADD t:set a
is ':1|' ZADD t:z 1 a
for k in t:l t:h t:set t:z; do
    is "$WRONGTYPE" GET "$k"
    is "$WRONGTYPE" INCR "$k"
done
is "$WRONGTYPE" HGET t:l a
is "$WRONGTYPE" SADD t:h a
is "$WRONGTYPE" ZADD t:set 1 a
is "$WRONGTYPE" LPUSH t:z a
is '+OK|' SET t:l v
is '$1|v|' GET t:l
is ':4|' DEL t:l t:h t:set t:z
is ':1|' DEL t:s
echo "kv_types_test: replies as Redis 7.0's"
[[ -n ${KV_TYPES_PORT:-} ]] && exit 0

# --- redis-benchmark's default suite (no -t: every test it has) must run through, without an error
# reply, and leave its keys as its commands make them.
redis-benchmark -p "$KV_PORT" -q -n 20000 >"$tmp/bench.out" 2>&1 || fail "redis-benchmark: $(cat "$tmp/bench.out")"
tr '\r' '\n' <"$tmp/bench.out" | grep 'requests per second' >"$tmp/bench.rps" || true
for t in PING_INLINE PING_MBULK SET GET INCR LPUSH RPUSH LPOP RPOP SADD HSET SPOP ZADD ZPOPMIN \
    LRANGE_100 LRANGE_300 LRANGE_500 LRANGE_600 MSET; do
    grep -q "^ *$t[: ]" "$tmp/bench.rps" || fail "redis-benchmark did not run $t: $(cat "$tmp/bench.out")"
done
grep -qi error "$tmp/bench.out" && fail "redis-benchmark: $(cat "$tmp/bench.out")"
is ':20000|' LLEN mylist # LPUSH, RPUSH, LPOP, RPOP 20,000 each, then LPUSH 20,000 for LRANGE
is ':1|' HLEN myhash     # without -r, __rand_int__ is not replaced: one field, one member
is ':0|' EXISTS myset    # SPOP and ZPOPMIN took the one member
is ':0|' EXISTS myzset
echo "kv_types_test: redis-benchmark's suite: $(wc -l <"$tmp/bench.rps") tests"

# --- Collections survive membership changes: built, then read back after workers are added,
# removed and crashed (each key moves with its whole object), changed in between.
nkeys=12
want_list=() want_hash=() want_set=() want_zset=()
build() { # build I: one collection of each type, of 50 + I members
    local i=$1 n=$((50 + $1)) j list=() hash=() set=() zset=()
    for ((j = 0; j < n; j++)); do
        list+=("e$j.$i")
        hash+=("f$j" "v$j.$i")
        set+=("m$j.$i")
        zset+=("$j.5" "z$j")
    done
    is ":$n|" RPUSH "list:$i" "${list[@]}"
    is ":$n|" HSET "hash:$i" "${hash[@]}"
    is ":$n|" SADD "set:$i" "${set[@]}"
    is ":$n|" ZADD "zset:$i" "${zset[@]}"
}
snapshot() { # snapshot I: every collection of I, as text
    echo "list $(cli LRANGE "list:$1" 0 -1 | tr '\n' ' ')"
    echo "hash $(cli HGETALL "hash:$1" | paste -d = - - | sort | tr '\n' ' ')"
    echo "set $(cli SMEMBERS "set:$1" | sort | tr '\n' ' ')"
    echo "zset $(cli ZRANGE "zset:$1" 0 -1 WITHSCORES | tr '\n' ' ')"
}
change() { # change I: one more member each, one fewer at the other end
    is ":$((51 + $1))|" RPUSH "list:$1" "new.$1"
    local first="e0.$1"
    is "\$${#first}|$first|" LPOP "list:$1"
    is ':1|' HSET "hash:$1" new "$1"
    is ':1|' HDEL "hash:$1" f0
    is ':1|' SADD "set:$1" "new.$1"
    is ':1|' SREM "set:$1" "m0.$1"
    is ':1|' ZADD "zset:$1" -1 new
    is '*2|$3|new|$2|-1|' ZPOPMIN "zset:$1"
    is ':1|' ZREM "zset:$1" z0
}
declare -A want
for ((i = 0; i < nkeys; i++)); do
    build "$i"
    want[$i]=$(snapshot "$i")
done
check() { # check WHEN
    local i
    for ((i = 0; i < nkeys; i++)); do
        expect "collections $i $1" "${want[$i]}" "$(snapshot "$i")"
    done
}
expect "SHARD.ADD n0" OK "$(cli SHARD.ADD n0)"
expect "SHARD.CRASH w0" OK "$(cli SHARD.CRASH w0)"
check "after w0 crashed"
for ((i = 0; i < nkeys; i++)); do
    change "$i"
    want[$i]=$(snapshot "$i")
done
expect "SHARD.ADD n1" OK "$(cli SHARD.ADD n1)"
expect "SHARD.REMOVE w1" OK "$(cli SHARD.REMOVE w1)"
check "after w1 removed"
expect "SHARD.ADD n2" OK "$(cli SHARD.ADD n2)"
expect "SHARD.CRASH n0" OK "$(cli SHARD.CRASH n0)"
check "after n0 crashed"
for ((i = 0; i < nkeys; i++)); do
    [[ $(cli SHARD.OWNER "list:$i") == n[12] ]] || fail "list:$i is on $(cli SHARD.OWNER "list:$i")"
done
echo "kv_types_test: $((4 * nkeys)) collections intact through 3 adds, 2 crashes and a removal"
echo "kv_types_test: passed"
