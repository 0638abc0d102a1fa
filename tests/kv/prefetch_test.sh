#!/usr/bin/env bash
# kv_server's prefetches are in the binary. GCC 12 at -O2 dropped them all once: a function that only
# reads and prefetches counts as without side effects, and a call to it that was not inlined early is
# removed (with LTO, across files too): store_prefetch and store_prefetch_entry were a bare `ret`
# until 2026-12-06, and MGET ran 1.2-1.5x the CPU it does with them. So each function that asks for
# loads ahead must still hold them, as prefetch instructions of its own (inlined) or as calls to the
# functions that prefetch:
#   request_submit  its part's bucket                                      (at least 1)
#   request_flush   the batch's entries, and prefetch_members' stages      (at least 2)
#   step            an MGET step: the bucket after next, the next entry    (at least 2)
# and store_prefetch, store_prefetch_entry and prefetch_members, wherever they have a body of their own,
# hold a prefetch. A compiler's renamed copies (step.lto_priv.0, f.constprop.0, ...) count as the
# function. Usage: prefetch_test.sh KV_SERVER
set -euo pipefail
bin=$1
fail() {
    echo "prefetch_test: $*"
    echo "0 passed, 1 failed"
    exit 1
}
command -v objdump > /dev/null || fail "objdump (binutils) is needed"
case $(uname -m) in
x86_64 | i?86) insn=prefetch ;;
aarch64 | arm64) insn=prfm ;;
*) fail "no prefetch instruction known for $(uname -m): add its name here" ;;
esac
dis=$(objdump -d --no-show-raw-insn "$bin")
grep -q '<request_flush[.>]' <<< "$dis" || fail "$bin has no symbols (stripped?): nothing to look at"

# The bodies of fn and its renamed copies, one after another (nothing when it has none).
bodies() {
    awk -v f="$1" '
        /^[0-9a-f]+ <.*>:$/ { name = $2; sub(/^</, "", name); sub(/>:$/, "", name); sub(/\..*/, "", name); on = name == f; next }
        /^$/ { on = 0 }
        on' <<< "$dis"
}
# Prefetch instructions in a body, and calls to the functions that prefetch.
prefetches() {
    local n calls
    n=$(grep -cE $'\t'"$insn"'[a-z0-9]*[[:space:]]' <<< "$1" || true)
    calls=$(grep -cE 'call.*<(store_prefetch|store_prefetch_entry|prefetch_members)[.>]' <<< "$1" || true)
    echo $((n + calls))
}

failed=0
for fn in store_prefetch store_prefetch_entry prefetch_members; do
    body=$(bodies "$fn")
    if [[ -n $body ]] && (($(grep -cE $'\t'"$insn" <<< "$body" || true) == 0)); then
        echo "prefetch_test: $fn has no $insn instruction; the compiler dropped it:"
        sed 's/^/  /' <<< "$body"
        failed=1
    fi
done
for want in request_submit:1 request_flush:2 step:2; do
    fn=${want%:*} least=${want#*:}
    body=$(bodies "$fn")
    [[ -n $body ]] || { echo "prefetch_test: no function $fn in $bin"; failed=1; continue; }
    got=$(prefetches "$body")
    if ((got < least)); then
        echo "prefetch_test: $fn asks for $got loads ahead (${insn}es and calls to the functions that prefetch), at least $least expected"
        failed=1
    else
        echo "prefetch_test: $fn asks for $got loads ahead (at least $least)"
    fi
done
if ((failed)); then
    echo "0 passed, 1 failed"
    exit 1
fi
echo "1 passed, 0 failed"
