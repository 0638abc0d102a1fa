#!/usr/bin/env bash
# shard's ring, following twemproxy's ketama through its hooks (examples/twemproxy_place), predicts
# for every key which server twemproxy sends it to.
#
#   twemproxy_test.sh PATH/TO/kv_server PATH/TO/twemproxy_place
#
# Starts three kv_servers and twemproxy (nutcracker: Redis mode, ketama, fnv1a_64) in front of them,
# writes 3,000 keys through the proxy, and checks against what each server actually holds: every key
# the ring assigns to a server exists there, and the server holds nothing else.
set -euo pipefail
kv=${1:?usage: twemproxy_test.sh KV_SERVER TWEMPROXY_PLACE}
place=${2:?usage: twemproxy_test.sh KV_SERVER TWEMPROXY_PLACE}
for tool in nutcracker redis-cli; do
    command -v "$tool" >/dev/null || { echo "FAIL: $tool not found (Debian packages nutcracker, redis-tools)"; exit 1; }
done
[[ -x $place ]] || { echo "FAIL: $place not built (Debian package nettle-dev)"; exit 1; }
source "$(dirname "$0")/../../scripts/kv_common.sh"

tmp=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do stop_pid "$p"; done
    rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
    echo "FAIL: $*"
    exit 1
}
export KV_LOG=$tmp/servers.err

ports=()
for s in 1 2 3; do
    kv_start "$kv" --workers 2
    pids+=("$KV_PID")
    ports+=("$KV_PORT")
done
twemproxy_start "$tmp" "${ports[@]}"
pids+=("$TW_PID")

keys=3000
for ((i = 0; i < keys; i++)); do echo "user:$i"; done >"$tmp/keys"
sed 's/.*/SET & v-&/' "$tmp/keys" | redis-cli -p "$TW_PORT" >"$tmp/set.out"
acked=$(grep -c '^OK$' "$tmp/set.out" || true)
((acked == keys)) || fail "twemproxy acknowledged $acked of $keys SETs"

"$place" s1 s2 s3 <"$tmp/keys" >"$tmp/placed"
for s in 1 2 3; do
    port=${ports[$((s - 1))]}
    mine=$(awk -F'\t' -v s="s$s" '$2 == s { print $1 }' "$tmp/placed")
    want=$(echo "$mine" | grep -c . || true)
    ((want > keys / 10)) || fail "the ring gives s$s only $want keys: not a useful check"
    held=$(redis-cli -p "$port" DBSIZE)
    ((held == want)) || fail "s$s holds $held keys, the ring predicts $want"
    found=0
    while read -r batch; do
        # shellcheck disable=SC2086 # one word per key
        found=$((found + $(redis-cli -p "$port" EXISTS $batch)))
    done < <(echo "$mine" | paste -d' ' $(printf -- '- %.0s' {1..500}))
    ((found == want)) || fail "s$s holds only $found of the $want keys the ring predicts"
    echo "s$s (port $port): $held keys, all where shard's ring put them"
done
[[ $(redis-cli -p "$TW_PORT" GET user:42) == v-user:42 ]] || fail "GET through the proxy"
echo "PASS: $keys keys, twemproxy's placement predicted exactly by shard's ring"
