# Shell helpers for the scripts and tests that run kv_server beside other Redis-protocol programs.
# Source it; it defines functions only.

# kv_start BIN [options...]: starts kv_server on a free port and waits for its "listening" line
# (through a FIFO, no polling). Sets KV_PID and KV_PORT. Its stderr goes to ${KV_LOG:-/dev/stderr}.
kv_start() {
    local bin=$1 fifo fd line
    shift
    fifo=$(mktemp -u)
    mkfifo "$fifo"
    "$bin" --port 0 "$@" >"$fifo" 2>>"${KV_LOG:-/dev/stderr}" &
    KV_PID=$!
    exec {fd}<"$fifo"
    rm -f "$fifo"
    if ! IFS= read -r -t 30 -u "$fd" line || [[ $line != *listening* ]]; then
        echo "kv_start: $bin did not start" >&2
        return 1
    fi
    exec {fd}<&-
    KV_PORT=${line##*:}
    KV_PORT=${KV_PORT%% *}
}

# free_port: prints a loopback TCP port nobody listens on now, below Linux's ephemeral range (32768
# up) so that no outgoing connection holds it either. For servers that cannot take port 0 and report.
free_port() {
    local p
    for ((p = 10000 + RANDOM % 22000; ; p = 10000 + RANDOM % 22000)); do
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            echo "$p"
            return
        fi
    done
}

# wait_ready PORT: waits (up to 30 s) until a Redis-protocol server answers PING on PORT; for servers
# such as redis-server and nutcracker that print no line when ready.
wait_ready() {
    local i
    for ((i = 0; i < 300; i++)); do
        [[ $(redis-cli -p "$1" PING 2>/dev/null) == PONG ]] && return 0
        sleep 0.1
    done
    echo "wait_ready: nothing answers on port $1" >&2
    return 1
}

# stop_pid PID: stops a process started by the script and waits for it.
stop_pid() {
    kill "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
}

# twemproxy_start DIR PORT...: starts twemproxy (nutcracker, Redis mode, ketama, fnv1a_64) in front
# of the Redis-protocol servers on PORT..., named s1, s2, ... (node names: what ketama hashes). Its
# configuration and log go to DIR. Sets TW_PID and TW_PORT.
twemproxy_start() {
    local dir=$1 i=1 p stats
    shift
    TW_PORT=$(free_port)
    stats=$(free_port)
    {
        echo "shard:"
        echo "  listen: 127.0.0.1:$TW_PORT"
        echo "  hash: fnv1a_64"
        echo "  distribution: ketama"
        echo "  redis: true"
        echo "  auto_eject_hosts: false"
        echo "  servers:"
        for p in "$@"; do
            echo "   - 127.0.0.1:$p:1 s$((i++))"
        done
    } >"$dir/nutcracker.yml"
    nutcracker -c "$dir/nutcracker.yml" -s "$stats" -a 127.0.0.1 -o "$dir/nutcracker.log" &
    TW_PID=$!
    wait_ready "$TW_PORT"
}

# kv_test_init: what every kv test script sets up: a scratch folder $tmp, removed at exit together
# with the servers still running (KV_PID, and the PIDs the script puts in kv_extra_pids); fail (the
# message, then the server's stderr if the script sent it to $tmp/server.err) and expect.
kv_test_init() {
    tmp=$(mktemp -d)
    kv_extra_pids=()
    trap kv_test_cleanup EXIT
}
kv_test_cleanup() {
    local p
    for p in ${KV_PID:-} "${kv_extra_pids[@]}"; do
        [[ -n $p ]] && kill "$p" 2>/dev/null && wait "$p" 2>/dev/null
    done
    rm -rf "$tmp"
}
fail() {
    echo "FAIL: $*"
    echo "--- server stderr:"
    cat "$tmp/server.err" 2>/dev/null || true
    exit 1
}
# read_lines FD N WHAT: reads N lines from FD, each waited for up to 30 s, into GOT_LINES (CRs
# stripped, each line ended by a newline); fails naming WHAT when fewer come.
read_lines() {
    local line i
    GOT_LINES=
    for ((i = 0; i < $2; i++)); do
        IFS= read -r -t 30 -u "$1" line || fail "$3: only $i of $2 lines"
        GOT_LINES+="${line%$'\r'}"$'\n'
    done
}

expect() { # expect WHAT EXPECTED ACTUAL
    [[ $2 == "$3" ]] || fail "$1: expected '$2', got '$3'"
}

# kv_churn_step: one membership change pair on the server cli talks to: a worker added (n0, n1, ...:
# the counter n) and the oldest of the array workers removed, or crashed three times in four; changes
# counts them. The kv tests' churn under load.
kv_churn_step() {
    local new=n$((n++)) victim=${workers[0]} verb=SHARD.CRASH
    expect "SHARD.ADD $new" OK "$(cli SHARD.ADD "$new")"
    workers=("${workers[@]:1}" "$new")
    if ((changes % 4 == 0)); then verb=SHARD.REMOVE; fi
    expect "$verb $victim" OK "$(cli "$verb" "$victim")"
    changes=$((changes + 2))
}
