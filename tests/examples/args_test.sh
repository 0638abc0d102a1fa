#!/usr/bin/env bash
# The examples' command lines: --help prints every option to stdout and exits 0; a mistake (unknown
# option, malformed, missing or out-of-range value, stray operand) exits 2 with a message on stderr
# naming it and nothing on stdout; the boundary values that are accepted give a run whose own checks
# pass (exit 0). crash_sim is tested on its own.
#
#   args_test.sh hello=PATH ring_demo=PATH player_sessions=PATH kv_server=PATH [twemproxy_place=PATH]
#
# twemproxy_place is left out when it was not built (no nettle). About 10 s on two cores;
# player_sessions at 64 workers and 2^20 players holds about 600 MB for a few seconds.
set -euo pipefail

declare -A bin
for arg in "$@"; do
    bin[${arg%%=*}]=${arg#*=}
done
for name in hello ring_demo player_sessions kv_server; do
    [[ -x ${bin[$name]:-} ]] || { echo "FAIL: no $name= argument naming a program"; exit 2; }
done

tmp=$(mktemp -d)
server_pid=
cleanup() {
    [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

checks=0
fail() {
    echo "FAIL: $*"
    echo "--- stdout:"
    head -c 2000 "$tmp/out" || true
    echo "--- stderr:"
    head -c 2000 "$tmp/err" || true
    exit 1
}

# run PROGRAM ARGS...: runs it with stdin from $tmp/in (empty unless a test wrote it); sets status.
run() {
    local name=$1
    shift
    what="$name $*"
    status=0
    timeout 120 "${bin[$name]}" "$@" <"$tmp/in" >"$tmp/out" 2>"$tmp/err" || status=$?
    checks=$((checks + 1))
}
: >"$tmp/in"

# refused MESSAGE PROGRAM ARGS...: exit 2, MESSAGE on stderr, nothing on stdout.
refused() {
    local msg=$1
    shift
    run "$@"
    ((status == 2)) || fail "$what: exit status $status, expected 2"
    grep -qF -- "$msg" "$tmp/err" || fail "$what: no \"$msg\" on stderr"
    [[ ! -s $tmp/out ]] || fail "$what: refused, yet printed on stdout"
}

# accepted PROGRAM ARGS...: exit 0 and nothing on stderr (a run's own checks passed).
accepted() {
    run "$@"
    ((status == 0)) || fail "$what: exit status $status, expected 0"
    [[ ! -s $tmp/err ]] || fail "$what: exit 0, but wrote on stderr"
}

# prints TEXT: stdout of the last run holds TEXT.
prints() {
    grep -qF -- "$1" "$tmp/out" || fail "$what: no \"$1\" on stdout"
}

# usage_ok PROGRAM OPTION...: --help and -h print the usage, naming each option, on stdout and exit 0;
# --help=x is a mistake; a usage that cannot be written is a failure.
usage_ok() {
    local name=$1 flag opt
    shift
    for flag in --help -h; do
        accepted "$name" "$flag"
        prints "usage: $name"
        for opt in "$@" --help; do
            grep -qE -- "^  $opt( |\$)" "$tmp/out" || fail "$what: the usage does not list $opt"
        done
    done
    refused "--help takes no value" "$name" --help=x
    status=0
    "${bin[$name]}" --help >/dev/full 2>/dev/null || status=$?
    ((status == 1)) || fail "$name --help >/dev/full: exit status $status, expected 1"
}

# --- hello: no options, no operands; only <shard.h> and libc (tests/install builds it alone), so its
# command line is its own: --help or -h alone, nothing else.
accepted hello
prints "20000 of 20000 packets ran, 0 out of order"
for flag in --help -h; do
    accepted hello "$flag"
    prints "usage: hello"
done
status=0
"${bin[hello]}" --help >/dev/full 2>/dev/null || status=$?
((status == 1)) || fail "hello --help >/dev/full: exit status $status, expected 1"
refused "unexpected argument '--frob'" hello --frob
refused "unexpected argument '--workers=2'" hello --workers=2
refused "unexpected argument '--help=x'" hello --help=x
refused "unexpected argument 'x'" hello x
refused "unexpected argument '--'" hello -- x
refused "unexpected argument '--help'" hello --help --help

# --- ring_demo: --servers 2..26, --keys 1..1000000.
accepted ring_demo
prints "OK: only charlie's keys moved"
usage_ok ring_demo --servers --keys
refused "unknown option '--frob'" ring_demo --frob
refused "--keys needs a whole number, not '12x'" ring_demo --keys 12x
refused "--keys needs a whole number, not ' 5'" ring_demo --keys " 5"
refused "--keys needs a whole number, not ''" ring_demo --keys=
refused "--servers 27 is out of range (2..26)" ring_demo --servers 27
refused "--servers 1 is out of range (2..26)" ring_demo --servers=1
refused "--keys 0 is out of range (1..1000000)" ring_demo --keys 0
refused "--keys 99999999999999999999 is out of range" ring_demo --keys 99999999999999999999
refused "--keys needs a value" ring_demo --keys
refused "unexpected argument 'extra'" ring_demo --keys 10 extra
accepted ring_demo --servers 2 --keys 1
prints "OK: only bravo's keys moved"
accepted ring_demo --servers=26 --keys=1000000
prints "OK: only november's keys moved"

# --- player_sessions: --players 2..2^20, --workers 2..64, --seconds 1..60, --churn-ms 1..1000. Each
# accepted run must pass its own checks: every packet once and in order, every membership change
# made (a failed one is on stderr), w1 crashed. The default run is ctest's example_player_sessions.
sessions_ok() {
    accepted player_sessions "$@"
    prints "one of them a crash of w1"
    prints "OK: every packet processed exactly once"
}
usage_ok player_sessions --players --workers --seconds --churn-ms
refused "unknown option '--frob'" player_sessions --frob 3
refused "--seconds needs a whole number, not '1.5'" player_sessions --seconds 1.5
refused "--workers 100000 is out of range (2..64)" player_sessions --workers 100000
refused "--workers 1 is out of range (2..64)" player_sessions --workers 1
refused "--players 1048577 is out of range (2..1048576)" player_sessions --players 1048577
refused "--seconds 0 is out of range (1..60)" player_sessions --seconds 0
refused "--churn-ms 1001 is out of range (1..1000)" player_sessions --churn-ms 1001
refused "--seconds needs a value" player_sessions --seconds
refused "unexpected argument '3'" player_sessions --seconds 1 3
sessions_ok --seconds 1 # once "membership change failed": the crash upset the add/remove turns
sessions_ok --seconds 1 --workers 2 --players 2
sessions_ok --seconds 1 --workers 2 --churn-ms 1000 # one change in the run: the crash
sessions_ok --seconds 1 --workers 64 --players 1048576
# Not run: --churn-ms 1 with two hot keys (--players 2). The crash finds w1 far behind keys that
# moved away from it and back; stress_hostile 11 covers the state split that caused most of its
# violations (5-7 runs in 10 before, 0 in 46 alone since), but about 1 run in 20 under load still
# counts a few, and a run can take minutes to drain its held backlog (set-aside jobs are not bounded
# by the queue's capacity). Add "sessions_ok --seconds 1 --workers 2 --players 2 --churn-ms 1" once
# both are fixed.

# --- kv_server: a server; started, asked PING (bash's /dev/tcp), stopped with SIGTERM.
# serves ARGS...: the server starts with ARGS, answers PING on the address it printed, and exits 0
# on SIGTERM.
serves() {
    local fifo=$tmp/fifo line host port reply
    what="kv_server $*"
    checks=$((checks + 1))
    rm -f "$fifo"
    mkfifo "$fifo"
    "${bin[kv_server]}" "$@" >"$fifo" 2>"$tmp/err" &
    server_pid=$!
    exec {fd}<"$fifo"
    IFS= read -r -t 30 -u "$fd" line || fail "$what: no line printed"
    exec {fd}<&-
    [[ $line =~ ^kv_server:\ listening\ on\ (.*):([0-9]+)\ with ]] || fail "$what: printed '$line'"
    host=${BASH_REMATCH[1]}
    port=${BASH_REMATCH[2]}
    exec {fd}<>"/dev/tcp/$host/$port" || fail "$what: cannot connect to $host port $port"
    printf 'PING\r\n' >&"$fd"
    IFS= read -r -t 10 -u "$fd" reply || true
    exec {fd}<&-
    [[ $reply == $'+PONG\r' ]] || fail "$what: PING answered '$reply'"
    kill -TERM "$server_pid"
    status=0
    wait "$server_pid" || status=$?
    server_pid=
    ((status == 0)) || fail "$what: exit status $status after SIGTERM"
    [[ ! -s $tmp/err ]] || fail "$what: wrote on stderr"
}
usage_ok kv_server --port --bind --workers --net-threads --queue --pipeline --max-request --max-args \
    --hot-keys --balance-ms --requirepass
refused "unknown option '--frobnicate'" kv_server --frobnicate
refused "--port wants a number in [0, 65535], not 'x'" kv_server --port x
refused "--port wants a number in [0, 65535], not '65536'" kv_server --port=65536
refused "--workers wants a number in [1, 4096], not '0'" kv_server --workers 0
refused "--queue wants a number in [1, 1048575], not '0'" kv_server --queue 0
refused "--max-request wants a number in [64, 536870912], not '63'" kv_server --max-request 63
refused "--bind needs a value" kv_server --bind
refused "--bind needs a value" kv_server --bind=
refused "--port wants a number in [0, 65535]" kv_server --port
refused "unexpected argument 'foo'" kv_server --port 0 foo
refused "unexpected argument 'foo'" kv_server -- foo
refused "--requirepass needs a value" kv_server --requirepass
refused "--requirepass takes at most 255 bytes" kv_server --requirepass "$(printf '%0256d' 0)"
grep -qF "usage: kv_server" "$tmp/err" || fail "$what: no synopsis on stderr"
serves --port 0
serves --port 0 --bind localhost
[[ -e /proc/net/if_inet6 ]] && serves --port 0 --bind ::1
serves --port 0 --workers 1 --net-threads 1 --queue 1 --pipeline 1 --max-request 64 --max-args 3
# The largest values, with 2 workers (4096 workers, shard's limit, take about 1 GB: not run here).
serves --port=0 --workers=2 --net-threads=64 --queue=1048575 --pipeline=1048576 --max-request=536870912 \
    --max-args=1048576

# --- twemproxy_place: operands NAME[:WEIGHT], up to 256; WEIGHT 1..1000000; NAME up to 79 bytes.
if [[ -n ${bin[twemproxy_place]:-} ]]; then
    printf 'player-1\nplayer-2\n' >"$tmp/in"
    accepted twemproxy_place s1 s2:2
    [[ $(grep -cE $'^player-[12]\ts[12]$' "$tmp/out") == 2 ]] || fail "$what: not two 'key<TAB>NAME' lines"
    accepted twemproxy_place --help
    prints "usage: twemproxy_place [options] NAME[:WEIGHT]..."
    prints "WEIGHT 1..1000000"
    usage_ok twemproxy_place
    refused "unknown option '--frob'" twemproxy_place --frob s1
    refused "no servers" twemproxy_place
    refused "'a:x': WEIGHT must be a whole number in 1..1000000, not 'x'" twemproxy_place a:x
    refused "'a:-1': WEIGHT must be a whole number in 1..1000000, not '-1'" twemproxy_place b a:-1
    refused "'a:': WEIGHT must be a whole number" twemproxy_place a:
    refused "'a:2x': WEIGHT must be a whole number" twemproxy_place a:2x
    refused "'a:0': WEIGHT must be a whole number in 1..1000000, not '0'" twemproxy_place a:0
    refused "'a:1000001': WEIGHT must be a whole number in 1..1000000" twemproxy_place a:1000001
    refused "':3': a server needs a NAME" twemproxy_place :3
    refused "NAME is longer than 79 bytes" twemproxy_place "$(printf 'n%.0s' {1..80})"
    refused "server 'a' is named twice" twemproxy_place a b a:2
    refused "'--help' looks like an option after a server" twemproxy_place a --help
    refused "257 servers, at most 256" twemproxy_place $(seq -f 's%g' 257)
    accepted twemproxy_place $(seq -f 's%g' 256)
    accepted twemproxy_place "$(printf 'n%.0s' {1..79}):1000000" b:1000000
    accepted twemproxy_place -- -a b
    ! cut -f2 "$tmp/out" | grep -qvxE -- '-a|b' || fail "$what: a key placed on neither -a nor b"
    # A weight that earns no points: twemproxy never picks that server; neither does the ring.
    run twemproxy_place a:1 b:1000000
    ((status == 0)) || fail "$what: exit status $status, expected 0"
    grep -qF "a (weight 1 of 1000001) gets no points" "$tmp/err" || fail "$what: no note on stderr"
    [[ $(cut -f2 "$tmp/out" | sort -u) == b ]] || fail "$what: a key went to a"
else
    echo "twemproxy_place not built (no nettle): its checks are skipped"
fi

echo "PASS: $checks runs of the examples' command lines"
