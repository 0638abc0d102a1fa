#!/usr/bin/env bash
# Every global symbol the library defines is shard_ (public) or shard__ (internal): an unprefixed one
# collides with a program's own (a program with its own queue_init failed to link). Usage: symbols.sh LIB
set -euo pipefail
lib=$1
case $lib in
*.so*) syms=$(nm -D --defined-only "$lib") ;;
*) syms=$(nm -g --defined-only "$lib") ;;
esac
foreign=$(echo "$syms" | awk 'NF == 3 && $2 ~ /[A-Z]/ {print $3}' | grep -v '^shard_' | sort -u || true)
count=$(echo "$syms" | awk 'NF == 3 && $2 ~ /[A-Z]/' | wc -l)
if [[ -n $foreign ]]; then
    echo "symbols: $lib defines global symbols without the shard_ prefix:"
    echo "$foreign" | sed 's/^/  /'
    echo "0 passed, 1 failed"
    exit 1
fi
echo "symbols: $count global symbols in $(basename "$lib"), all prefixed shard_ or shard__"
echo "1 passed, 0 failed"
