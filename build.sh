#!/usr/bin/env bash
# One entry point for people and CI:
#   ./build.sh help      this text
#   ./build.sh demo      install what is missing, build, run the demo
#   ./build.sh test      install what is missing, build, run the whole test suite
#   ./build.sh quick     install what is missing, build the unit tests alone (target unit_tests) and
#                        run them: ctest -L unit, the Criterion suites and the source checks, under a
#                        minute (no example, stress program, kv or install test)
#   ./build.sh kv-server install what is missing, build examples/kv_server alone (build/examples/)
#   ./build.sh sanitize  the suite under AddressSanitizer + UndefinedBehaviorSanitizer, then the
#                        multi-threaded programs under ThreadSanitizer
#   ./build.sh fuzz      the libFuzzer targets (clang), each for FUZZ_SECONDS (default 30) from the
#                        committed seed corpus; new inputs go to build-fuzz/, not to the corpus
#   ./build.sh clang     builds everything with clang -Werror and runs the unit and example tests
#   ./build.sh valgrind  the Criterion suites under valgrind memcheck: no error, no leak (all but the
#                        two 100,000-key ring suites, which take minutes there and ASan covers)
#   ./build.sh bench     every benchmark (bench/run; pass --quick), installing libck-dev and
#                        DPDK's libdpdk-dev (about 230 packages) for bench_peers' ck_ring and rte_ring
#                        columns
#   ./build.sh bench-peers
#                        bench_peers alone, against every peer: installs libck-dev and DPDK's
#                        libdpdk-dev (about 230 packages) for the rte_ring column; options are passed on
#   ./build.sh kv-bench  kv_server against redis-server with redis-benchmark and with kv_load
#                        (bench/kv_vs_redis; pass --quick for a short run, --kv-load or
#                        --redis-benchmark for one table)
#   ./build.sh docs      the API reference (doxygen, HTML and man pages) in build-docs/docs/api;
#                        fails on any undocumented public name
#   ./build.sh twemproxy three kv_servers behind twemproxy, driven by redis-benchmark
#                        (scripts/kv_twemproxy; pass --quick for a short run)
# Build trees go to build/, build-asan/, build-tsan/, build-clang/ and build-docs/.
set -euo pipefail
cd "$(dirname "$0")"

packages=(build-essential cmake pkg-config liburcu-dev libxxhash-dev libcriterion-dev redis-tools
          nutcracker nettle-dev libmimalloc-dev libsodium-dev python3 python3-redis librsvg2-bin)

install_missing() {
    local missing=()
    for p in "${packages[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    if ((${#missing[@]})); then
        echo "build.sh: installing ${missing[*]}"
        local sudo=()
        ((EUID == 0)) || sudo=(sudo)
        "${sudo[@]}" apt-get update -qq
        DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${missing[@]}"
    fi
}

configure() { # configure DIR [cmake options...]
    local dir=$1
    shift
    cmake -S . -B "$dir" -DSHARD_WERROR=ON "$@" >/dev/null
}

build() { # build DIR [cmake options...]
    configure "$@"
    cmake --build "$1" -j "$(nproc)"
}

jobs=$(nproc)

case "${1:-}" in
help | -h | --help)
    sed -n '2,/^# Build trees/{s/^# \{0,1\}//;p}' "$0"
    ;;
demo)
    install_missing
    build build
    ./build/examples/crash_sim/crash_sim
    ;;
test)
    install_missing
    build build
    ctest --test-dir build --output-on-failure -j "$jobs"
    ;;
quick)
    install_missing
    configure build
    cmake --build build -j "$(nproc)" --target unit_tests
    ctest --test-dir build --output-on-failure -j "$jobs" -L unit
    ;;
kv-server)
    install_missing
    configure build
    cmake --build build -j "$(nproc)" --target kv_server
    echo "kv_server: build/examples/kv_server (--help for its options)"
    ;;
sanitize)
    install_missing
    build build-asan -DSHARD_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=Debug
    ASAN_OPTIONS=detect_leaks=1 ctest --test-dir build-asan --output-on-failure -j "$jobs"
    build build-tsan -DSHARD_SANITIZE=thread -DCMAKE_BUILD_TYPE=RelWithDebInfo
    TSAN_OPTIONS="halt_on_error=1 suppressions=$PWD/tests/tsan.supp" \
        ctest --test-dir build-tsan --output-on-failure -j "$jobs" -L threads
    ;;
fuzz)
    packages+=(clang libclang-rt-14-dev)
    install_missing
    CC=clang build build-fuzz -DSHARD_BUILD_FUZZ=ON -DSHARD_SANITIZE=address,undefined \
        -DSHARD_BUILD_TESTS=OFF -DSHARD_BUILD_BENCH=OFF -DSHARD_BUILD_EXAMPLES=OFF
    for target in ring dispatcher resp; do
        mkdir -p "build-fuzz/corpus-$target"
        ./build-fuzz/fuzz/fuzz_$target -max_total_time="${FUZZ_SECONDS:-30}" -print_final_stats=1 \
            "build-fuzz/corpus-$target" "fuzz/corpus/$target"
    done
    ;;
clang)
    packages+=(clang)
    install_missing
    CC=clang build build-clang
    ctest --test-dir build-clang --output-on-failure -j "$jobs" -L 'unit|example'
    ;;
valgrind)
    packages+=(valgrind)
    install_missing
    build build
    status=0
    for t in build/tests/test_*; do
        [[ -x $t ]] || continue
        # 100,000-key single-threaded suites: minutes under valgrind, and ASan covers them.
        [[ $t == */test_ring_movement || $t == */test_ring_diff ]] && continue
        # test_check's abort test kills its child by design, and valgrind then reports what Criterion's
        # child still held; the suite allocates nothing of shard's, and runs in every other build.
        [[ $t == */test_check ]] && continue
        log=build/$(basename "$t").valgrind.log
        # Criterion runs each test in a child whose exit status valgrind cannot pass up: with -q,
        # any line valgrind prints is an error or a leak, so the log decides.
        valgrind -q --leak-check=full --errors-for-leak-kinds=definite,indirect --trace-children=yes \
            "$t" --jobs 1 >"$log" 2>&1 || status=1
        if grep -q '^==[0-9]*==' "$log"; then
            echo "valgrind: $(basename "$t"): errors or leaks:"
            grep '^==[0-9]*==' "$log" | head -n 40
            status=1
        else
            echo "valgrind: $(basename "$t"): clean ($(grep -o 'Tested: [0-9]*' "$log" | tail -n 1))"
        fi
    done
    exit $status
    ;;
docs)
    packages+=(doxygen)
    install_missing
    build build-docs -DSHARD_BUILD_DOCS=ON -DSHARD_BUILD_BENCH=OFF -DSHARD_BUILD_EXAMPLES=OFF
    ctest --test-dir build-docs --output-on-failure -R api_docs
    echo "API reference: build-docs/docs/api/html/index.html, man pages in build-docs/docs/api/man"
    ;;
bench)
    packages+=(libck-dev libdpdk-dev)
    install_missing
    bench/run "${@:2}"
    ;;
bench-peers)
    packages+=(libck-dev libdpdk-dev)
    install_missing
    build build-bench -DCMAKE_BUILD_TYPE=Release -DSHARD_BUILD_TESTS=OFF -DSHARD_BUILD_EXAMPLES=OFF
    ./build-bench/bench/bench_peers "${@:2}"
    ;;
kv-bench)
    packages+=(redis-server)
    install_missing
    bench/kv_vs_redis "${@:2}"
    ;;
twemproxy)
    packages+=(redis-server)
    install_missing
    build build
    scripts/kv_twemproxy "${@:2}"
    ;;
*)
    echo "usage: $0 help|demo|test|quick|kv-server|sanitize|clang|docs|fuzz|valgrind|bench|bench-peers|kv-bench|twemproxy" >&2
    exit 2
    ;;
esac
