#!/bin/sh
# Builds and runs a program with the flags pkg-config gives for the installed shard, exactly as a user
# would: PKG_CONFIG_PATH pointing at the installed files, nothing else (they are relocatable: the
# prefix follows from where they lie). The source is copied alone into a directory of its own, so
# that nothing beside it in this tree can be included (examples/hello.c builds with <shard.h> and
# libc only).
# MODE "shared": shard.pc, the library found at run time through the rpath docs/using.md tells users
# of a custom prefix to add (no LD_LIBRARY_PATH), and the program must need libshard.so; "static":
# `pkg-config --libs shard-static` alone (libshard.a by its path, then liburcu, libxxhash and
# pthreads), and the program must not need libshard.so.
# SANITIZE (optional): the program is built with -fsanitize=SANITIZE and run as docs/using.md says: the
# installed suppressions file (the .pc's tsan_suppressions) for ThreadSanitizer, which halts on a
# report; leak checking for AddressSanitizer.
# Usage: consumer_pkgconfig.sh PREFIX SRC OUT CC MODE [SANITIZE]
set -eu
prefix=$1 src=$2 out=$3 cc=$4 mode=$5 sanitize=${6:-}
pcdir=$(dirname "$(find "$prefix" -name shard.pc | head -n 1)")
export PKG_CONFIG_PATH="$pcdir"
pc="pkg-config"
if [ "$mode" = static ]; then pkg=shard-static; else pkg=shard; fi
$pc --exists $pkg || { echo "no $pkg.pc installed in $pcdir"; exit 1; }
case "$($pc --variable=includedir $pkg)" in
"$prefix"/*|"$pcdir"/*) ;;
*) echo "$pkg.pc points outside the install prefix: $($pc --variable=includedir $pkg)"; exit 1 ;;
esac
test -f "$($pc --variable=includedir $pkg)/shard.h" || { echo "$pkg.pc's includedir has no shard.h"; exit 1; }
supp=$($pc --variable=tsan_suppressions $pkg)
test -f "$supp" || { echo "$pkg.pc's tsan_suppressions, $supp, was not installed"; exit 1; }
libdir=$($pc --variable=libdir $pkg)
flags="-std=c11 -Wall -Wextra -Werror"
[ -z "$sanitize" ] || flags="$flags -g -fsanitize=$sanitize -fno-sanitize-recover=all -fno-omit-frame-pointer"
if [ "$mode" = static ]; then
    libs=$($pc --libs shard-static)
else
    libs="$($pc --libs shard) -Wl,-rpath,$libdir"
fi
rm -rf "$out.src"
mkdir -p "$out.src"
cp "$src" "$out.src/"
"$cc" $flags -o "$out" "$out.src/$(basename "$src")" $($pc --cflags $pkg) $libs
env -u LD_LIBRARY_PATH TSAN_OPTIONS="halt_on_error=1 suppressions=$supp" ASAN_OPTIONS=detect_leaks=1 "$out"
if readelf -d "$out" | grep -q 'libshard\.so'; then needs=shared; else needs=static; fi
[ "$needs" = "$mode" ] || { echo "asked for the $mode library, the program links the $needs one"; exit 1; }
echo "$(basename "$src"), $mode${sanitize:+, -fsanitize=$sanitize}, through pkg-config: built, ran, linked as asked"
