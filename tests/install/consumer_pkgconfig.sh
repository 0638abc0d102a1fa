#!/bin/sh
# Builds and runs the consumer with the flags pkg-config gives for the installed shard.pc, exactly as
# a user would: PKG_CONFIG_PATH pointing at the installed file, nothing else (the .pc is
# relocatable: its prefix follows from where it lies).
set -eu
prefix=$1 src=$2 out=$3 cc=$4
pcdir=$(dirname "$(find "$prefix" -name shard.pc | head -n 1)")
export PKG_CONFIG_PATH="$pcdir"
# --static: a static libshard needs its Requires.private (liburcu, libxxhash) on the link line.
pc="pkg-config"
case "$($pc --variable=includedir shard)" in
"$prefix"/*|"$pcdir"/*) ;;
*) echo "shard.pc points outside the install prefix: $($pc --variable=includedir shard)"; exit 1 ;;
esac
test -f "$($pc --variable=includedir shard)/shard.h" || { echo "shard.pc's includedir has no shard.h"; exit 1; }
"$cc" -o "$out" "$src" $($pc --cflags shard) $($pc --libs --static shard)
LD_LIBRARY_PATH="$($pc --variable=libdir shard)" "$out"
