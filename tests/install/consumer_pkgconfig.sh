#!/bin/sh
# Builds and runs the consumer with the flags pkg-config gives for the installed shard.pc.
set -eu
prefix=$1 src=$2 out=$3 cc=$4
pcdir=$(dirname "$(find "$prefix" -name shard.pc | head -n 1)")
export PKG_CONFIG_PATH="$pcdir"
# --static: a static libshard needs its Requires.private (liburcu, libxxhash) on the link line.
pc="pkg-config --define-variable=prefix=$prefix"
"$cc" -o "$out" "$src" $($pc --cflags shard) $($pc --libs --static shard)
LD_LIBRARY_PATH="$($pc --variable=libdir shard)" "$out"
