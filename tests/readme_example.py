#!/usr/bin/env python3
"""The front page's code is real: every ```c block in README.md compiles, as a file of its own,
against the public headers with -std=c11 -Wall -Wextra -Wpedantic -Werror.
Usage: readme_example.py CC INCLUDE_DIR README. Exits 1 if a block does not compile or there is none."""
import os
import re
import subprocess
import sys
import tempfile

cc, include, readme = sys.argv[1:4]
blocks = re.findall(r'^```c\n(.*?)^```$', open(readme, encoding='utf-8').read(), re.M | re.S)
failed = 0
with tempfile.TemporaryDirectory() as tmp:
    for i, code in enumerate(blocks, start=1):
        src = os.path.join(tmp, f'readme_{i}.c')
        open(src, 'w', encoding='utf-8').write(code)
        cmd = [cc, '-std=c11', '-Wall', '-Wextra', '-Wpedantic', '-Werror', '-I', include,
               '-c', src, '-o', os.path.join(tmp, f'readme_{i}.o')]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            failed += 1
            print(f'readme_example: block {i} of README.md does not compile:\n{r.stdout}{r.stderr}')
if not blocks:
    print('readme_example: README.md has no ```c block')
    failed = 1
print(f'readme_example: {len(blocks)} C blocks, {failed} failed')
print(f'{0 if failed else 1} passed, {1 if failed else 0} failed')
sys.exit(1 if failed else 0)
