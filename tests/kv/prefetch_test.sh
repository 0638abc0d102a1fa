#!/usr/bin/env bash
# kv_server's prefetches are in the binary: each function that exists to start loading a lookup's
# lines holds a prefetch instruction. GCC 12 at -O2 dropped them whole (a function that only reads
# and prefetches counts as without side effects, and a call to it that was not inlined early is
# removed): store_prefetch and store_prefetch_entry were a bare `ret` until 2026-12-06, and MGET ran
# 1.2-1.5x the CPU it does with them. Usage: prefetch_test.sh KV_SERVER
set -euo pipefail
bin=$1
command -v objdump > /dev/null || { echo "prefetch_test: objdump (binutils) is needed"; echo "0 passed, 1 failed"; exit 1; }
dis=$(objdump -d --no-show-raw-insn "$bin")
# Its function's body, or nothing when the binary has none of that name.
body_of() {
    awk -v f="<$1>:" '$2 == f {on = 1; next} on && /^$/ {exit} on' <<< "$dis"
}
failed=0
# request_flush's loads past a key's entry are prefetch_members', a static function the compiler may
# fold into it.
members=prefetch_members
[[ -n $(body_of prefetch_members) ]] || members=request_flush
for fn in store_prefetch store_prefetch_entry $members; do
    body=$(body_of "$fn")
    n=$(grep -cP '\tprefetch' <<< "$body" || true)
    if [[ -z $body ]]; then
        echo "prefetch_test: no function $fn in $bin"
        failed=1
    elif ((n == 0)); then
        echo "prefetch_test: $fn has no prefetch instruction; the compiler dropped it:"
        sed 's/^/  /' <<< "$body"
        failed=1
    else
        echo "prefetch_test: $fn prefetches ($n instructions)"
    fi
done
if ((failed)); then
    echo "0 passed, 1 failed"
    exit 1
fi
echo "1 passed, 0 failed"
