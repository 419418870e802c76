#!/usr/bin/env python3
"""Every relative link of README.md and docs/ resolves: the file or folder exists and, for a link to a
Markdown heading (`page.md#heading`, `#heading`), the heading does (GitHub's anchors). Run by the doc
test (run_doc_blocks.py, phase cli) and on its own:

    check_links.py [REPO]
"""
from __future__ import annotations

import glob
import os
import re
import sys

PAGES = ["README.md", "python/README.md", "docs/*.md", "docs/*/*.md"]
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(`{3,}|~{3,})")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]|<[^>]+>", "", heading.strip().lower())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return "".join(c for c in text if c.isalnum() or c in " -_").replace(" ", "-")


def prose_lines(text: str) -> list[tuple[int, str]]:
    """The lines outside fenced code blocks, numbered from 1."""
    out, fence = [], None
    for n, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if m and (fence is None or m.group(1).startswith(fence)):
            fence = m.group(1)[:3] if fence is None else None
            continue
        if fence is None:
            out.append((n, line))
    return out


def anchors(path: str) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for _, line in prose_lines(open(path, encoding="utf-8").read()):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            s = slug(m.group(1))
            out.add(s if s not in seen else f"{s}-{seen[s]}")
            seen[s] = seen.get(s, 0) + 1
    return out


def check(repo: str) -> list[str]:
    """The broken links, one message each."""
    failures = []
    pages = sorted({p for pat in PAGES for p in glob.glob(os.path.join(repo, pat))})
    for page in pages:
        rel_page = os.path.relpath(page, repo)
        for n, line in prose_lines(open(page, encoding="utf-8").read()):
            for target in LINK.findall(line):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                    continue  # http:, https:, mailto:
                path, _, anchor = target.partition("#")
                full = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
                rel = os.path.relpath(full, repo)
                where = f"{rel_page}:{n}: {target}"
                if rel.startswith(".."):
                    failures.append(f"{where}: points outside the repository")
                elif not os.path.exists(full):
                    failures.append(f"{where}: {rel} does not exist")
                elif anchor and full.endswith(".md") and anchor not in anchors(full):
                    failures.append(f"{where}: no heading #{anchor} in {rel}")
    print(f"links: {len(pages)} pages")
    return failures


if __name__ == "__main__":
    problems = check(os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")))
    for p in problems:
        print("FAIL " + p)
    sys.exit(1 if problems else 0)
