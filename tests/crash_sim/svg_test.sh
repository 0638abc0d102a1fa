#!/usr/bin/env bash
# crash_sim --svg: the picture is well-formed, small, says what it shows, and renders.
# For the default run and the largest --nodes: parses the SVG as XML, checks its size bound and the
# title, legend and axis labels, renders it to PNG with rsvg-convert (Debian librsvg2-bin; build.sh
# installs it) and checks the PNG: its signature, its size in pixels, and that it is not blank.
#   svg_test.sh path/to/crash_sim
set -euo pipefail
sim=${1:?usage: $0 path/to/crash_sim}
max_bytes=100000 # the brief allows a few hundred KB; the picture is about 25-40 KB
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
    echo "svg_test: FAILED: $*" >&2
    exit 1
}
command -v rsvg-convert >/dev/null ||
    fail "rsvg-convert not found: install librsvg2-bin (build.sh does)"

for args in "" "--nodes 1000 --keys 1000"; do
    svg=$tmp/crash.svg png=$tmp/crash.png
    # shellcheck disable=SC2086 # args is a list of words
    "$sim" $args --svg "$svg" >"$tmp/out" || fail "crash_sim $args --svg exited $?"
    size=$(stat -c %s "$svg")
    ((size < max_bytes)) || fail "crash_sim $args: the SVG is $size bytes, over $max_bytes"
    python3 - "$svg" <<'PY' || fail "crash_sim $args: the SVG is not what it should be"
import sys, xml.etree.ElementTree as et
root = et.parse(sys.argv[1]).getroot()
text = " ".join("".join(t.itertext()) for t in root.iter("{http://www.w3.org/2000/svg}text"))
want = ["crashes: what moves on a consistent-hash ring", "unchanged", "the crashed node",
        "taken over by the next node clockwise", "sessions on the node", "node number",
        "position on the ring", "sessions that changed node", "A. The ring", "B. Sessions per node",
        "C. Zoom", "D. Share of all sessions"]
missing = [w for w in want if w not in text]
if missing:
    sys.exit(f"missing text: {missing}")
PY
    rsvg-convert "$svg" -o "$png" || fail "crash_sim $args: rsvg-convert could not render the SVG"
    python3 - "$png" <<'PY' || fail "crash_sim $args: the PNG is not a 1200x1000 picture"
import struct, sys
data = open(sys.argv[1], "rb").read()
if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
    sys.exit("not a PNG")
width, height = struct.unpack(">II", data[16:24])
if (width, height) != (1200, 1000):
    sys.exit(f"{width}x{height}")
# a blank 1200x1000 PNG compresses to a few KB; the picture is over 100 KB
if len(data) < 50000:
    sys.exit(f"only {len(data)} bytes: nearly blank")
PY
    echo "svg_test: crash_sim $args: SVG $size bytes, PNG $(stat -c %s "$png") bytes: ok"
done
