#!/usr/bin/env python3
"""The version numbers agree: what the headers promise was added in a version the library has reached.

Usage: versions.py VERSION INCLUDE_DIR CHANGELOG [LIBRARY.so]

VERSION is project()'s (x.y.z). Checks that
- include/shard/common.h's SHARD_VERSION_MAJOR/MINOR/PATCH say VERSION;
- no "added in X.Y", "since X.Y" nor "(X.Y)" / "; X.Y)" note in a public header names a version
  after VERSION (a header that says "added in 0.2" in a library that reports 0.1.0 tells a user to
  test for a version that does not exist yet);
- every public function that is not in the first API (FIRST_API: the headers when the CHANGELOG
  began, which the library called 0.1) says in which version it was added: "added in X.Y" in its own
  doc comment, or in its header's @file comment; and the CHANGELOG's X.Y.0 section names it (a
  SHARD_VERSION_HEX check needs the note, and the note is only as good as the CHANGELOG behind it);
- CHANGELOG has a "## VERSION" section (the version was cut from Unreleased);
- the shared library's soname follows the policy of CMakeLists.txt: libshard.so.0.MINOR while the
  major version is 0 (a minor version may change the ABI then), libshard.so.MAJOR from 1.0 on."""
import pathlib
import re
import subprocess
import sys

NOTE = re.compile(r"(?:added in|since) (\d+)\.(\d+)|[(;] ?(\d+)\.(\d+)\)")
ADDED = re.compile(r"added in (\d+\.\d+)")
# A declaration and the doc comment it follows, with only other declarations between (a comment that
# introduces two calls, say).
DECL = re.compile(r"SHARD_API[^;{]*?\b(shard_\w+)\s*\(")
BETWEEN = re.compile(r"\s*(?:SHARD_API[^;{]*;\s*)*")

# The public functions of the headers when the CHANGELOG began (db1127a: everything after them came
# with a CHANGELOG entry). Frozen: a function is added once.
FIRST_API = set("""
shard_dispatcher_create shard_dispatcher_destroy shard_dispatcher_ring shard_dispatcher_stats
shard_dispatcher_worker_stats shard_drain shard_ring_add shard_ring_add_many shard_ring_checksum
shard_ring_clone shard_ring_create shard_ring_destroy shard_ring_diff shard_ring_hash shard_ring_member
shard_ring_member_count shard_ring_memory shard_ring_owner shard_ring_owner_of_hash shard_ring_owners
shard_ring_owners_of_hash shard_ring_point shard_ring_point_count shard_ring_remove shard_ring_share
shard_ring_weight shard_strerror shard_submit shard_try_submit shard_worker_add shard_worker_crash
shard_worker_dispatcher shard_worker_name shard_worker_remove shard_worker_set_user shard_worker_user
""".split())


def added_in(text, at):
    """The "added in X.Y" of the doc comment the declaration at `at` follows, else None."""
    end = text.rfind("*/", 0, at)
    start = text.rfind("/**", 0, end) if end >= 0 else -1
    if start < 0 or not BETWEEN.fullmatch(text, end + 2, at):
        return None
    note = ADDED.search(text, start, end)
    return note.group(1) if note else None


def sections(changelog):
    """CHANGELOG's "## X.Y.Z" sections by X.Y."""
    parts = re.split(r"^## ", changelog, flags=re.M)[1:]
    return {m.group(1): part for part in parts if (m := re.match(r"(\d+\.\d+)\.\d+\b", part))}


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

    log = pathlib.Path(changelog).read_text()
    if not re.search(rf"^## {re.escape(version)}\b", log, re.M):
        failures.append(f"{changelog.name} has no '## {version}' section")

    by_version = sections(log)
    functions = 0
    for path in sorted(include.glob("*.h")) + sorted(include.glob("shard/*.h")):
        text = path.read_text()
        head = re.search(r"/\*\*\s*@file.*?\*/", text, re.S)
        file_note = ADDED.search(head.group(0)) if head else None
        for decl in DECL.finditer(text):
            name = decl.group(1)
            functions += 1
            if name in FIRST_API:
                continue
            since = added_in(text, decl.start()) or (file_note.group(1) if file_note else None)
            if not since:
                failures.append(f"{path.name}: {name} is not in the first API and says in no 'added in X.Y'")
            elif not re.search(rf"\b{name}\b", by_version.get(since, "")):
                failures.append(f"{path.name}: {name} was 'added in {since}', which {changelog.name}'s "
                                f"{since}.0 section does not name")
    if functions < len(FIRST_API):
        failures.append(f"found {functions} public functions: the declaration pattern no longer matches")

    if len(sys.argv) == 5:
        want = f"libshard.so.{major}.{minor}" if major == 0 else f"libshard.so.{major}"
        dyn = subprocess.run(["readelf", "-d", sys.argv[4]], capture_output=True, text=True, check=True).stdout
        got = re.search(r"\(SONAME\)\s+Library soname: \[([^]]+)\]", dyn)
        if not got or got.group(1) != want:
            failures.append(f"soname {got.group(1) if got else '(none)'}, the policy says {want}")

    for f in failures:
        print(f"FAIL: {f}")
    if not failures:
        print(f"versions: {version}: headers, {notes} notes, {functions} functions, CHANGELOG and soname agree")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
