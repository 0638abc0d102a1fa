#!/usr/bin/env python3
"""The core's layering by calls: no circle among src/'s files through the functions and variables
they take from one another (include_cycles.py checks the headers' includes).

A file's room is its .c and its .h together (`queue.c` and `queue.h` are one room; a header with no
.c, as job.h or ring_layout.h, is a room of its own). Room A uses room B when A's text names an
external `shard_` or `shard__` symbol that B defines (a function or variable defined at file scope
and not static in B.c), or any static inline function or macro of B.h, whatever its name. A header's
text counts only in its inline functions' bodies and its macros: a prototype uses nothing. Naming a
function counts whether or not the name is called (a function pointer compared is a use too). Types
are not counted: a struct shared through a header is the include graph's business.

With LAYOUT (docs/layout.md), also checks that its src/ section names every room and lists them so
that each calls only rooms named before it (its reading order, bottom layer first).

Usage: call_cycles.py SRC_DIR [LAYOUT]. Prints the circles; exits 1 on any, or on a layout that is
out of order."""
import os
import re
import sys

src = sys.argv[1]
texts = {}
for name in sorted(os.listdir(src)):
    if name.endswith(('.c', '.h')):
        with open(os.path.join(src, name)) as f:
            texts[name] = f.read()


def strip(text):
    """The text without comments and string literals."""
    text = re.sub(r'/\*.*?\*/', ' ', text, flags=re.S)
    text = re.sub(r'//[^\n]*', ' ', text)
    return re.sub(r'"(\\.|[^"\\])*"', '""', text)


def room(name):
    return name.rsplit('.', 1)[0]


IDENT = re.compile(r'(?<!struct )(?<!union )(?<!enum )\b[A-Za-z_]\w*')
defines = {}  # symbol -> room
for name, text in texts.items():
    body = strip(text)
    if name.endswith('.c'):
        # A definition at file scope: a line at column 0, not static, not a declaration (;) alone.
        for m in re.finditer(r'^(?!static\b|extern\b|typedef\b|#)[A-Za-z_][^;{}()=]*?\b(shard_\w+)\s*(\(|=|;|\[)',
                             body, re.M):
            sym, tail = m.group(1), m.group(2)
            if tail == '(':
                # A function: its definition has a body; a prototype ends with ';' first.
                rest = body[m.end():]
                close = rest.find(')')
                after = rest[close + 1:].lstrip() if close >= 0 else ''
                if not after.startswith('{') and not re.match(r'\)\s*\{', rest[close:]):
                    # Multi-line parameter lists: look for '{' before ';'.
                    brace, semi = rest.find('{'), rest.find(';')
                    if brace < 0 or (0 <= semi < brace):
                        continue
            defines.setdefault(sym, room(name))
    else:
        # A header's inline functions and macros, whatever their names (pin_as_node, SHARD_CHECK_W).
        for m in re.finditer(r'^static\s+inline\b[^;{]*?\b(\w+)\s*\(', body, re.M):
            defines.setdefault(m.group(1), room(name))
        for m in re.finditer(r'^#\s*define\s+(\w+)', text, re.M):
            if not re.fullmatch(r'SHARD_SRC_\w+_H', m.group(1)):  # include guards
                defines.setdefault(m.group(1), room(name))

def inline_bodies(text):
    """A header's code: the bodies of its static inline functions and its macros (its prototypes
    and declarations use nothing)."""
    body, out = strip(text), []
    for m in re.finditer(r'^static\s+inline\b[^;{]*\{', body, re.M):
        depth, i = 1, m.end()
        while depth and i < len(body):
            depth += {'{': 1, '}': -1}.get(body[i], 0)
            i += 1
        out.append(body[m.end():i])
    out += re.findall(r'^#\s*define\s+\w+(?:\([^)]*\))?((?:.*\\\n)*.*)', text, re.M)
    return '\n'.join(out)


uses = {}
for name, text in texts.items():
    r = room(name)
    targets = uses.setdefault(r, {})
    code = strip(text) if name.endswith('.c') else inline_bodies(text)
    for sym in set(IDENT.findall(code)):
        to = defines.get(sym)
        if to and to != r:
            targets.setdefault(to, set()).add(sym)

# Tarjan's strongly connected components.
index, low, stack, on, sccs = {}, {}, [], set(), []


def connect(v):
    index[v] = low[v] = len(index)
    stack.append(v)
    on.add(v)
    for w in sorted(uses.get(v, {})):
        if w not in index:
            connect(w)
            low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop()
            on.discard(w)
            comp.append(w)
            if w == v:
                break
        sccs.append(sorted(comp))


sys.setrecursionlimit(10000)
for v in sorted(uses):
    if v not in index:
        connect(v)

circles = [c for c in sccs if len(c) > 1]
for c in circles:
    members = set(c)
    print(f"call_cycles: a circle of {len(c)}: {' '.join(c)}")
    for a in c:
        for b, syms in sorted(uses.get(a, {}).items()):
            if b in members:
                print(f"  {a} -> {b}: {' '.join(sorted(syms))}")
failed = 1 if circles else 0
if len(sys.argv) > 2:
    with open(sys.argv[2]) as f:
        layout = f.read()
    start = layout.find('\nsrc/')
    end = layout.find('\ntests/', start)
    order = []
    for m in re.finditer(r'\b(\w+)\.[ch]\b', layout[start:end]):
        if m.group(1) not in order:
            order.append(m.group(1))
    pos = {r: i for i, r in enumerate(order)}
    for r in sorted(uses):
        if r not in pos:
            failed = 1
            print(f"call_cycles: {sys.argv[2]} does not list {r}")
        for t in sorted(uses[r]):
            if r in pos and t in pos and pos[t] > pos[r]:
                failed = 1
                print(f"call_cycles: {sys.argv[2]} lists {r} before {t}, which it calls")
rooms = len(uses)
arrows = sum(len(t) for t in uses.values())
print(f"call_cycles: {rooms} rooms, {arrows} arrows, {len(circles)} circle(s)")
print(f"{0 if failed else 1} passed, {1 if failed else 0} failed")
sys.exit(1 if failed else 0)
