#!/usr/bin/env python3
"""The core's layering: no cycle among src/'s headers, and no .c file includes another .c file.
Usage: include_cycles.py SRC_DIR. Prints the graph, bottom layer first; exits 1 on a cycle."""
import os
import re
import sys

src = sys.argv[1]
graph = {}
for name in sorted(os.listdir(src)):
    path = os.path.join(src, name)
    incs = re.findall(r'^#include "([^"]+)"', open(path).read(), re.M)
    if name.endswith('.c') and any(i.endswith('.c') for i in incs):
        print(f"include_cycles: {name} includes a .c file")
        sys.exit(1)
    if name.endswith('.h'):
        graph[name] = [i for i in incs if not i.startswith('shard/')]

order, state = [], {}


def visit(node, path):
    if state.get(node) == 'done':
        return
    if state.get(node) == 'open':
        print('include_cycles: cycle ' + ' -> '.join(path[path.index(node):] + [node]))
        sys.exit(1)
    state[node] = 'open'
    for dep in graph.get(node, []):
        visit(dep, path + [node])
    state[node] = 'done'
    order.append(node)


for node in graph:
    visit(node, [])
for node in order:
    print(f"  {node}: {' '.join(graph[node]) or '-'}")
print(f"include_cycles: {len(graph)} headers, no cycle")
print("1 passed, 0 failed")
