#!/usr/bin/env bash
# build.sh's commands are all documented: each case arm is in the usage line, in the header comment
# (which `./build.sh help` prints) and, but help, in the documentation (README.md or docs/*.md; demo,
# test and quick on the front page itself); an unknown command exits 2 with the usage. And the two
# that build less than everything do what they say: quick builds the unit_tests target and runs the
# unit label alone, kv-server builds the kv_server target alone.
#   build_sh_test.sh SOURCE_DIR
set -euo pipefail
src=$1
script=$src/build.sh
fail() {
    echo "FAIL: $*"
    exit 1
}
bash -n "$script" || fail "build.sh does not parse"

# The case arms between `case "${1:-}" in` and the catch-all `*)`: "name)" or "name | alias ...)".
mapfile -t commands < <(sed -n '/^case "\${1:-}" in$/,/^\*)$/p' "$script" |
    sed -nE 's/^([a-z][a-z-]*)( \|[^)]*)?\)$/\1/p')
((${#commands[@]} >= 10)) || fail "found only ${#commands[@]} commands in build.sh: ${commands[*]}"

status=0
"$script" no-such-command >/dev/null 2>"${TMPDIR:-/tmp}/build_sh_test.$$" || status=$?
usage=$(cat "${TMPDIR:-/tmp}/build_sh_test.$$")
rm -f "${TMPDIR:-/tmp}/build_sh_test.$$"
((status == 2)) || fail "an unknown command: exit status $status, expected 2"
help=$("$script" help) || fail "build.sh help failed"
for c in "${commands[@]}"; do
    [[ $usage =~ [\ \|]$c(\||$) ]] || fail "'$c' is not in the usage line: $usage"
    grep -qE "^#   \./build\.sh $c( |$)" "$script" || fail "'$c' is not described in build.sh's header"
    grep -qE "^  \./build\.sh $c( |$)" <<<"$help" || fail "build.sh help does not describe '$c'"
    [[ $c == help ]] || grep -qF "./build.sh $c" "$src/README.md" "$src"/docs/*.md ||
        fail "neither README.md nor docs/*.md mentions ./build.sh $c"
done
for c in demo test quick; do
    grep -qF "./build.sh $c" "$src/README.md" || fail "the front page (README.md) does not mention ./build.sh $c"
done

arm() { # the body of a case arm
    sed -n "/^$1)\$/,/^    ;;\$/p" "$script"
}
for c in quick kv-server; do
    [[ " ${commands[*]} " == *" $c "* ]] || fail "build.sh has no '$c' command"
done
arm quick | grep -q -- '--target unit_tests' || fail "quick does not build the unit_tests target"
arm quick | grep -qE -- 'ctest .*-L unit( |$)' || fail "quick does not run ctest -L unit"
arm kv-server | grep -q -- '--target kv_server' || fail "kv-server does not build the kv_server target alone"
echo "build.sh: ${#commands[@]} commands, each documented; quick and kv-server build what they say"
