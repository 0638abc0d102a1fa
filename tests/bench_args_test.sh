#!/usr/bin/env bash
# The benchmarks' command lines: --help prints the usage line on stdout and exits 0; a wrong argument
# exits 2 with a message on stderr naming it and nothing on stdout, never a full run nobody asked
# for; bench_peers also refuses a system or a case that does not exist (or was not built).
#
#   bench_args_test.sh BENCH_PEERS_PATH OTHER_BENCH_PATH...
set -euo pipefail

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
checks=0

# refused MESSAGE PROGRAM ARGS...
refused() {
    local msg=$1 status=0
    shift
    timeout 60 "$@" >"$tmp/out" 2>"$tmp/err" || status=$?
    checks=$((checks + 1))
    ((status == 2)) || { echo "FAIL: $*: exit status $status, expected 2"; cat "$tmp/err"; exit 1; }
    grep -qF -- "$msg" "$tmp/err" || { echo "FAIL: $*: no \"$msg\" on stderr"; cat "$tmp/err"; exit 1; }
    [[ ! -s $tmp/out ]] || { echo "FAIL: $*: refused, yet printed on stdout"; head -5 "$tmp/out"; exit 1; }
}

peers=$1
shift
for b in "$peers" "$@"; do
    status=0
    timeout 60 "$b" --help >"$tmp/out" 2>"$tmp/err" || status=$?
    checks=$((checks + 1))
    ((status == 0)) && grep -q "^usage: .*\[--quick\]" "$tmp/out" && [[ ! -s $tmp/err ]] ||
        { echo "FAIL: $b --help: exit status $status, or no usage line on stdout"; cat "$tmp/out" "$tmp/err"; exit 1; }
    refused "unknown argument '--frobnicate'" "$b" --frobnicate
    refused "unknown argument 'quick'" "$b" quick
done
refused "no system 'nonesuch'" "$peers" --impl=nonesuch --quick
refused "no case 'nonesuch'" "$peers" --case=nonesuch --quick
refused "unknown argument '--impl'" "$peers" --impl
for b in "$@"; do
    [[ $(basename "$b") != bench_pins ]] || refused "unknown argument '--max=1'" "$b" --max=1 # below its counts
    [[ $(basename "$b") != bench_mesh ]] || refused "--poll-us= is 1 to 1000000" "$b" --poll-us=0
    if [[ $(basename "$b") == bench_multi ]]; then
        refused "no mode 'nonesuch'" "$b" --only=nonesuch
        refused "--rate= is 1 to 10000000" "$b" --rate=0
        refused "--rate= is 1 to 10000000" "$b" --rate=fast
        refused "--work-ns= is 0 to 1000000" "$b" --work-ns=
        refused "leaves multi_hot out" "$b" --rate=1000 --only=multi_hot
    fi
done
echo "bench_args: $checks checks passed"
