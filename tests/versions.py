#!/usr/bin/env python3
"""The version numbers agree: what the headers promise was added in a version the library has reached.

Usage: versions.py VERSION INCLUDE_DIR CHANGELOG [LIBRARY.so]

VERSION is project()'s (x.y.z). Checks that
- include/shard/common.h's SHARD_VERSION_MAJOR/MINOR/PATCH say VERSION;
- no "added in X.Y" nor "(X.Y)" / "; X.Y)" note in a public header names a version after VERSION
  (a header that says "added in 0.2" in a library that reports 0.1.0 tells a user to test for a
  version that does not exist yet);
- CHANGELOG has a "## VERSION" section (the version was cut from Unreleased);
- the shared library's soname follows the policy of CMakeLists.txt: libshard.so.0.MINOR while the
  major version is 0 (a minor version may change the ABI then), libshard.so.MAJOR from 1.0 on."""
import pathlib
import re
import subprocess
import sys

NOTE = re.compile(r"added in (\d+)\.(\d+)|[(;] ?(\d+)\.(\d+)\)")


def main():
    if len(sys.argv) not in (4, 5):
        print(__doc__, file=sys.stderr)
        return 2
    version, include, changelog = sys.argv[1], pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])
    m = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", version)
    if not m:
        print(f"versions.py: '{version}' is not x.y.z", file=sys.stderr)
        return 2
    major, minor, patch = map(int, m.groups())
    failures = []

    common = (include / "shard" / "common.h").read_text()
    macros = {k: int(v) for k, v in re.findall(r"#define SHARD_VERSION_(MAJOR|MINOR|PATCH) (\d+)", common)}
    if (macros.get("MAJOR"), macros.get("MINOR"), macros.get("PATCH")) != (major, minor, patch):
        failures.append(f"shard/common.h says {macros}, project() says {version}")

    notes = 0
    for path in sorted(include.glob("*.h")) + sorted(include.glob("shard/*.h")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            for note in NOTE.finditer(line):
                x, y = [int(g) for g in note.groups() if g is not None]
                notes += 1
                if (x, y) > (major, minor):
                    failures.append(f"{path.name}:{n}: \"{note.group(0)}\", but the library is {version}")
    if not notes:
        failures.append("no version note found in the headers: the pattern no longer matches them")

    if not re.search(rf"^## {re.escape(version)}\b", pathlib.Path(changelog).read_text(), re.M):
        failures.append(f"{changelog.name} has no '## {version}' section")

    if len(sys.argv) == 5:
        want = f"libshard.so.{major}.{minor}" if major == 0 else f"libshard.so.{major}"
        dyn = subprocess.run(["readelf", "-d", sys.argv[4]], capture_output=True, text=True, check=True).stdout
        got = re.search(r"\(SONAME\)\s+Library soname: \[([^]]+)\]", dyn)
        if not got or got.group(1) != want:
            failures.append(f"soname {got.group(1) if got else '(none)'}, the policy says {want}")

    for f in failures:
        print(f"FAIL: {f}")
    if not failures:
        print(f"versions: {version}: headers, {notes} notes, CHANGELOG and soname agree")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
