"""Fenced code blocks of the documentation and the doc-test directives above them
(docs/development/documentation.md).

A block runs when its fence says ```sh, ```bash, ```console or ```python; every other language
(```text, ```json, ```cpp, ...) is not a program and is never run; a fence without a language is an
error, so that nothing is left unjudged. HTML comments right above a block (blank lines allowed) give
directives:

    <!-- doc-test: skip (REASON) -->          not run; printed with the reason
    <!-- doc-test: replace "OLD" "NEW" -->    every OLD in the block becomes NEW before it runs (printed)
    <!-- doc-test: setup COMMAND -->          a shell command run first in the block's folder (printed)
    <!-- doc-test: package -->                needs the Python package: runs with the Python blocks
    <!-- doc-test: pytest -->                 a ```python block that is a pytest file
    <!-- doc-test: excerpt PATH -->           a block that cannot run alone (```cpp, ```cmake) is an
                                              excerpt of PATH, a file the tests build: checked line by line

A command line ending in `# exit N` must exit N (default 0), in ```sh and ```console blocks alike.
"""
from __future__ import annotations

import dataclasses
import re
import shlex

RUN_LANGS = {"sh": "sh", "bash": "sh", "console": "console", "python": "python"}
DIRECTIVE = re.compile(r"^<!--\s*doc-test:\s*(\w[\w-]*)\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([^\s`]*)")
EXIT = re.compile(r"#\s*exit\s+(\d+)\b")


class DocError(Exception):
    """A malformed block or directive (file:line in the message)."""


@dataclasses.dataclass
class Block:
    path: str
    line: int              # 1-based line of the opening fence
    lang: str              # the fence's language, as written
    text: str
    skip: str | None = None
    replaces: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    setups: list[str] = dataclasses.field(default_factory=list)
    package: bool = False
    pytest: bool = False
    excerpt: str | None = None

    @property
    def kind(self) -> str | None:
        """sh, console, python, or None for a block that is not a program."""
        return RUN_LANGS.get(self.lang)

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    def phase(self) -> str | None:
        """cli (ctest, the binary only), python (after the package is installed) or None (not run)."""
        if self.kind is None or self.skip is not None:
            return None
        return "python" if self.kind == "python" or self.package else "cli"

    def program(self) -> str:
        text = self.text
        for old, new in self.replaces:
            if old not in text:
                raise DocError(f"{self.where}: replace: {old!r} is not in the block")
            text = text.replace(old, new)
        return text


def _apply_directive(block: Block, name: str, arg: str, where: str) -> None:
    if name == "skip":
        reason = arg.strip()
        if not (reason.startswith("(") and reason.endswith(")") and len(reason) > 2):
            raise DocError(f"{where}: skip needs a reason in parentheses: skip (why)")
        block.skip = reason[1:-1]
    elif name == "replace":
        parts = shlex.split(arg)
        if len(parts) != 2:
            raise DocError(f'{where}: replace takes two quoted strings: replace "OLD" "NEW"')
        block.replaces.append((parts[0], parts[1]))
    elif name == "setup":
        if not arg:
            raise DocError(f"{where}: setup needs a command")
        block.setups.append(arg)
    elif name == "excerpt" and arg:
        block.excerpt = arg
    elif name in ("package", "pytest") and not arg:
        setattr(block, name, True)
    else:
        raise DocError(f"{where}: unknown doc-test directive '{name} {arg}'".rstrip("' ") + "'")


def parse(path: str, text: str) -> list[Block]:
    """Every fenced block of a Markdown file, with its directives."""
    blocks: list[Block] = []
    pending: list[tuple[str, str, str]] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        m = DIRECTIVE.match(line.strip())
        if m:
            pending.append((m.group(1), m.group(2), f"{path}:{i + 1}"))
            i += 1
            continue
        if "doc-test:" in line and line.strip().startswith("<!--"):
            raise DocError(f"{path}:{i + 1}: malformed doc-test comment (one directive per comment, on one line)")
        f = FENCE.match(line)
        if f:
            fence, lang = f.group(2), f.group(3)
            if not lang:
                raise DocError(f"{path}:{i + 1}: fence without a language (```text for output, ```sh for commands)")
            end = i + 1
            while end < len(lines) and not lines[end].strip().startswith(fence):
                end += 1
            if end == len(lines):
                raise DocError(f"{path}:{i + 1}: fence never closed")
            indent = len(f.group(1))
            body = "\n".join(l[indent:] if not l[:indent].strip() else l.lstrip() for l in lines[i + 1:end])
            block = Block(path, i + 1, lang, body + "\n")
            for name, arg, where in pending:
                _apply_directive(block, name, arg, where)
            if pending and block.kind is None and not (block.excerpt and len(pending) == 1):
                raise DocError(f"{block.where}: doc-test directives above a ```{lang} block, which never runs "
                               "(only `excerpt PATH` applies to it)")
            if block.pytest and block.kind != "python":
                raise DocError(f"{block.where}: pytest is for ```python blocks")
            blocks.append(block)
            pending = []
            i = end + 1
            continue
        if line.strip() and pending:
            raise DocError(f"{pending[0][2]}: doc-test directive not followed by a code block")
        i += 1
    if pending:
        raise DocError(f"{pending[0][2]}: doc-test directive at the end of the file")
    return blocks


def logical_lines(text: str) -> list[tuple[str, int]]:
    """Shell text as (command line, expected exit) pairs: continuation lines joined, `# exit N` read."""
    out: list[tuple[str, int]] = []
    current = ""
    for raw in text.split("\n"):
        current += raw
        if current.endswith("\\"):
            current = current[:-1] + " "
            continue
        m = EXIT.search(current)
        out.append((current, int(m.group(1)) if m else 0))
        current = ""
    if current:
        out.append((current, 0))
    return out


def console_commands(block: Block, text: str) -> list[tuple[str, int, list[str]]]:
    """A console block as (command, expected exit, expected output lines) triples. Commands are the
    lines starting `$ ` (with their continuations); the lines up to the next command are output that
    must appear, in order, in what the command prints (`...` lines stand for anything)."""
    cmds: list[tuple[str, int, list[str]]] = []
    lines = text.rstrip("\n").split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.startswith("$ "):
            if cmds:
                cmds[-1][2].append(line.rstrip())
                i += 1
                continue
            raise DocError(f"{block.where}: a console block starts with a `$ ` command line")
        cmd = line[2:]
        while cmd.endswith("\\") and i + 1 < len(lines):
            i += 1
            cmd = cmd[:-1] + " " + lines[i].strip()
        m = EXIT.search(cmd)
        cmds.append((cmd, int(m.group(1)) if m else 0, []))
        i += 1
    return cmds


def excerpt_problem(block: Block, file_text: str) -> str | None:
    """None when every line of the block, comments and spacing aside, is part of a line of the file, in
    order; else the first line that is not."""
    comment = "#" if block.lang in ("cmake", "sh", "bash", "python") else "//"

    def norm(line: str) -> str:
        return " ".join(line.split(comment, 1)[0].split())

    lines = [norm(l) for l in file_text.split("\n")]
    at = 0
    for want in (norm(l) for l in block.text.split("\n")):
        if not want:
            continue
        while at < len(lines) and want not in lines[at]:
            at += 1
        if at == len(lines):
            return want
        at += 1
    return None
