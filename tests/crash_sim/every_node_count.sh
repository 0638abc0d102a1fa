#!/usr/bin/env bash
# Runs crash_sim for every --nodes it accepts (6..1000) at one --keys (default 1000, the smallest),
# and lists the runs whose checks failed. The checks of the ring itself (a node's share of the
# circle, the load spread, Maglev's table) depend on N only, so this run is their proof for every
# accepted input; the checks of the sessions allow for chance (stats.c). Takes a few minutes, so it
# is not a ctest: run it after changing a check.
#   tests/crash_sim/every_node_count.sh build/examples/crash_sim/crash_sim [KEYS]
set -uo pipefail
sim=${1:?usage: $0 path/to/crash_sim [keys]}
keys=${2:-1000}
failed=0
for ((n = 6; n <= 1000; n++)); do
    if ! out=$("$sim" --nodes "$n" --keys "$keys" 2>&1); then
        echo "--nodes $n --keys $keys:"
        grep FAILED <<<"$out"
        failed=$((failed + 1))
    fi
done
echo "every_node_count: $failed of 995 runs failed (--keys $keys)"
((failed == 0))
