#!/usr/bin/env python3
"""The documentation's links hold: every relative link and image in README.md and docs/**/*.md names
a file or directory of the repository, and a #fragment into a markdown file names a heading there by
its GitHub anchor (or an HTML name/id). Links with a scheme (https:, mailto:) are not followed; code
(fenced blocks, `spans`) is not read.
Usage: doc_links.py SOURCE_DIR. Lists every broken link as FILE:LINE; exits 1 if there is one."""
import os
import re
import sys
import urllib.parse

root = os.path.realpath(sys.argv[1])
FENCE = re.compile(r'^ {0,3}(`{3,}|~{3,})')
INLINE = re.compile(r'\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+"[^"]*"|\s+\'[^\']*\')?\s*\)')  # [a](b), ![a](b), both nested
REFDEF = re.compile(r'^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)')
HTML = re.compile(r'<(?:a|img)\b[^>]*?\b(?:href|src)\s*=\s*"([^"]*)"', re.I)
HTML_ANCHOR = re.compile(r'<[a-z]+\b[^>]*?\b(?:name|id)\s*=\s*"([^"]*)"', re.I)
SCHEME = re.compile(r'^[a-zA-Z][a-zA-Z0-9+.-]*:|^//')


def prose(path):
    """(line number, text) of the lines outside fenced code, inline code spans blanked."""
    fence = None
    for n, line in enumerate(open(path, encoding='utf-8').read().split('\n'), start=1):
        m = FENCE.match(line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not line.strip(' `~'):
                fence = None
            continue
        if m:
            fence = m.group(1)
            continue
        yield n, re.sub(r'(`+)(?:(?!\1).)+?\1', lambda s: ' ' * len(s.group(0)), line)


def slug(heading):
    """GitHub's anchor for a heading: its rendered text, lower case, punctuation but - and _ gone,
    spaces to hyphens."""
    text = re.sub(r'`+([^`]*)`+', r'\1', heading)
    text = re.sub(r'!?\[([^\]]*)\]\([^)]*\)', r'\1', text)
    text = re.sub(r'<[^>]+>', '', text)
    text = text.replace('**', '').replace('*', '')
    text = re.sub(r'[^\w\- ]', '', text.strip().lower())
    return text.replace(' ', '-')


anchor_cache = {}


def anchors(path):
    if path not in anchor_cache:
        seen, found = {}, set()
        lines = list(prose(path))
        raw = open(path, encoding='utf-8').read().split('\n')
        for i, (n, line) in enumerate(lines):
            found.update(HTML_ANCHOR.findall(line))
            text = None
            m = re.match(r'^ {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$', line)
            if m:
                text = raw[n - 1].strip().lstrip('#').strip().rstrip('#').strip()
            elif (re.match(r'^ {0,3}(=+|-+)\s*$', line) and i > 0 and lines[i - 1][0] == n - 1
                  and lines[i - 1][1].strip() and not lines[i - 1][1].lstrip().startswith(('|', '-', '*'))):
                text = raw[n - 2].strip()
            if text is None:
                continue
            s = slug(text)
            k = seen.get(s, 0)
            seen[s] = k + 1
            found.add(s if k == 0 else f'{s}-{k}')
        anchor_cache[path] = found
    return anchor_cache[path]


def targets(line):
    for rx in (INLINE, REFDEF, HTML):
        for t in rx.findall(line):
            yield t[1:-1] if t.startswith('<') and t.endswith('>') else t


pages = [os.path.join(root, 'README.md')]
for d, _, files in os.walk(os.path.join(root, 'docs')):
    pages += [os.path.join(d, f) for f in sorted(files) if f.endswith('.md')]
broken, links, fragments = [], 0, 0
for page in sorted(pages):
    here = os.path.relpath(page, root)
    for n, line in prose(page):
        for target in targets(line):
            if SCHEME.match(target):
                continue
            links += 1
            path, _, fragment = target.partition('#')
            path = urllib.parse.unquote(path)
            if not path:
                dest = page
            elif path.startswith('/'):
                dest = os.path.normpath(os.path.join(root, path.lstrip('/')))
            else:
                dest = os.path.normpath(os.path.join(os.path.dirname(page), path))
            if not (dest == root or dest.startswith(root + os.sep)):
                broken.append(f'{here}:{n}: {target}: outside the repository')
            elif not os.path.exists(dest):
                broken.append(f'{here}:{n}: {target}: no file {os.path.relpath(dest, root)}')
            elif fragment and dest.endswith('.md'):
                fragments += 1
                if urllib.parse.unquote(fragment) not in anchors(dest):
                    broken.append(f'{here}:{n}: {target}: no heading #{fragment} in {os.path.relpath(dest, root)}')
for b in broken:
    print(f'doc_links: {b}')
print(f'doc_links: {len(pages)} pages, {links} relative links ({fragments} into a heading), {len(broken)} broken')
print(f'{0 if broken else 1} passed, {1 if broken else 0} failed')
sys.exit(1 if broken else 0)
