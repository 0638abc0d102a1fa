#!/bin/sh
# Builds and runs the consumer with the flags pkg-config gives for the installed shard.pc, exactly as
# a user would: PKG_CONFIG_PATH pointing at the installed file, nothing else (the .pc is
# relocatable: its prefix follows from where it lies). MODE "shared": plain `pkg-config --libs`, and
# the program must need libshard.so; "static": `pkg-config --libs --static` (the static library's
# Requires.private, liburcu and libxxhash, join the link line) with libshard.a picked by -Bstatic.
# Usage: consumer_pkgconfig.sh PREFIX SRC OUT CC MODE
set -eu
prefix=$1 src=$2 out=$3 cc=$4 mode=$5
pcdir=$(dirname "$(find "$prefix" -name shard.pc | head -n 1)")
export PKG_CONFIG_PATH="$pcdir"
pc="pkg-config"
case "$($pc --variable=includedir shard)" in
"$prefix"/*|"$pcdir"/*) ;;
*) echo "shard.pc points outside the install prefix: $($pc --variable=includedir shard)"; exit 1 ;;
esac
test -f "$($pc --variable=includedir shard)/shard.h" || { echo "shard.pc's includedir has no shard.h"; exit 1; }
libdir=$($pc --variable=libdir shard)
if [ "$mode" = static ]; then
    libs=$($pc --libs --static shard | sed 's/-lshard\b/-Wl,-Bstatic -lshard -Wl,-Bdynamic/')
else
    libs=$($pc --libs shard)
fi
"$cc" -o "$out" "$src" $($pc --cflags shard) $libs
LD_LIBRARY_PATH="$libdir" "$out"
if readelf -d "$out" | grep -q 'libshard\.so'; then needs=shared; else needs=static; fi
[ "$needs" = "$mode" ] || { echo "asked for the $mode library, the program links the $needs one"; exit 1; }
echo "$mode consumer through pkg-config: built, ran, linked as asked"
