"""Write tfm's larger English corpus, ``src/tfm/corpora/python_docs.txt.xz``: the prose of the whole Python 3.11
documentation (chapter 14's language model reads it; chapters 12 and 13 keep the small corpus of make_corpus.py).

Source: the reStructuredText sources that Sphinx ships inside the HTML documentation (``_sources/*.rst.txt``), from
Debian 12's package ``python3.11-doc``, version 3.11.2-6+deb12u9 (the Python documentation is under the PSF License
Agreement, version 2, which allows copying it with its notice, kept in the file's header). The package is fetched
once with ``apt-get download python3.11-doc`` (no root needed) and read as a .deb archive; the snapshot is fixed so
that every machine, Colab included, reads the same text.

What is kept: paragraphs of prose, with reStructuredText's markup removed (``:func:`len``` becomes ``len``, ````x````
becomes ``x``, a link keeps its text). What is dropped: headings, code (literal blocks after ``::``, doctests,
code directives), tables, the signatures of documented functions, directives' options, and paragraphs of fewer than
six words, or with fewer than 70% plain words, or not ending like a sentence. A paragraph that occurs more than once
in the documentation is kept once (its first occurrence in path order). One paragraph a line, each document under a
``## <path>`` line. Run once: ``python -m tools.corpus.make_docs_corpus [--deb FILE] [--out FILE]`` (without --deb,
the package is downloaded; tests/test_pydocs.py checks that it still writes the shipped bytes).
"""

from __future__ import annotations

import argparse
import io
import lzma
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from tools import ROOT

OUT = ROOT / "src" / "tfm" / "corpora" / "python_docs.txt.xz"
PACKAGE = "python3.11-doc"
VERSION = "3.11.2-6+deb12u9"
SOURCES = "./usr/share/doc/python3.11/html/_sources/"
HEADER = f"""\
# tfm corpus: prose paragraphs of the Python 3.11 documentation, one paragraph a line, under '## <document>' lines.
# Source: the reStructuredText sources in Debian's {PACKAGE} {VERSION} (usr/share/doc/python3.11/html/_sources).
# Copyright (c) 2001-2023 Python Software Foundation; All Rights Reserved.
# Licensed under the PSF License Agreement, version 2 (https://docs.python.org/3/license.html).
# Kept: prose paragraphs only (tools/corpus/make_docs_corpus.py in the book's repository says how they were chosen).
"""
# Directives whose body is not prose (code, tables, indexes, metadata).
SKIPPED = {"code-block", "sourcecode", "code", "testcode", "testsetup", "testcleanup", "testoutput", "doctest",
           "literalinclude", "productionlist", "toctree", "index", "highlight", "raw", "image", "figure",
           "tabularcolumns", "csv-table", "list-table", "table", "math", "only", "include", "audit-event-table",
           "availability", "autosummary", "c:macro", "c:var", "opcode", "pdbcommand", "grammar-snippet"}
DIRECTIVE = re.compile(r"^(\s*)\.\.\s+([\w:-]+)::(.*)$")
COMMENT = re.compile(r"^(\s*)\.\.(\s|$)")  # a comment, a target (.. _label:) or a substitution definition
UNDERLINE = re.compile(r"^([=\-~^\"'`#*+<>._:])\1{2,}\s*$")
TABLE = re.compile(r"^\s*(\+[-=+]+\+|={2,}(\s+={2,})+)\s*$")
BULLET = re.compile(r"^(\s*)([-*+•]|#\.|\d+\.|\(\d+\)|[a-z]\.)\s+")
FIELD = re.compile(r"^\s*:[\w -]+:(\s|$)")
ROLE = re.compile(r":[\w:.+-]+:`([^`]*)`")
LINK = re.compile(r"`([^`<]*?)\s*<[^>`]*>`__?")
PLAIN_WORD = re.compile(r"^[(\"“‘'\[]*[A-Za-z][A-Za-z’'-]*[)\"”’'\]]*[,.;:?!]?$")


def strip_markup(text: str) -> str:
    """reStructuredText inline markup as the reader sees it."""

    def role(match: re.Match) -> str:
        inner = match.group(1)
        inner = re.sub(r"\s*<[^>]*>$", "", inner)  # :ref:`text <target>` -> text
        inner = inner.lstrip("!")
        if inner.startswith("~"):  # :func:`~os.path.join` -> join
            inner = inner[1:].split(".")[-1]
        return inner

    text = ROLE.sub(role, text)
    text = LINK.sub(lambda m: m.group(1), text)
    text = re.sub(r"``(.+?)``", r"\1", text)
    text = re.sub(r"`([^`]+)`_{0,2}", r"\1", text)
    text = re.sub(r"\[#\w*\]_|\[\d+\]_", "", text)  # footnote references
    text = re.sub(r"\*\*(.+?)\*\*", r"\1", text)
    text = re.sub(r"(?<![\w*])\*(\S(?:.*?\S)?)\*(?![\w*])", r"\1", text)
    text = re.sub(r"\|(\w[\w -]*)\|_?", r"\1", text)  # substitutions
    text = text.replace("\\ ", "").replace("\\", "")
    return " ".join(text.split())


def blocks(source: str) -> list[str]:
    """The prose paragraphs of one reStructuredText document, markup still in."""
    lines = source.splitlines()
    paragraphs, current = [], []
    skip_deeper_than = None  # inside a skipped block: the indentation of the line that opened it
    literal_next = False  # the last paragraph ended with '::': the indented block after it is code

    def flush():
        nonlocal literal_next
        if current:
            text = " ".join(current)
            literal_next = text.rstrip().endswith("::")
            paragraphs.append(re.sub(r"\s*::$", ":", text.rstrip()))
            current.clear()

    for i, line in enumerate(lines):
        indent = len(line) - len(line.lstrip())
        stripped = line.strip()
        if skip_deeper_than is not None:
            if not stripped or indent > skip_deeper_than:
                continue
            skip_deeper_than = None
        if not stripped:
            flush()
            continue
        if literal_next and not current:
            previous = next((len(x) - len(x.lstrip()) for x in reversed(lines[:i]) if x.strip()), 0)
            literal_next = False
            if indent > 0 and indent >= previous:
                skip_deeper_than = indent - 1
                continue
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        directive = DIRECTIVE.match(line)
        if directive:
            flush()
            name = directive.group(2)
            # a documented object's signature (.. function:: f(x)) is code; its body is prose
            if name in SKIPPED or name.startswith(("c:", "cpp:")) and name != "c:function":
                skip_deeper_than = indent
            continue
        if COMMENT.match(line) or UNDERLINE.match(stripped) or TABLE.match(line) or FIELD.match(line):
            flush()
            if TABLE.match(line):
                skip_deeper_than = indent - 1
            continue
        if UNDERLINE.match(nxt.strip()) and len(nxt.strip()) >= len(stripped) > 0:  # a heading
            flush()
            continue
        if stripped.startswith((">>>", "...", "$ ", "%")) and not current:
            skip_deeper_than = indent - 1
            continue
        bullet = BULLET.match(line)
        if bullet:
            flush()
            stripped = line[bullet.end():].strip()
        current.append(stripped)
    flush()
    return paragraphs


def prose(paragraph: str) -> str | None:
    """The paragraph as plain text if it reads as prose, else None."""
    text = strip_markup(paragraph)
    words = text.split()
    if len(words) < 6 or text[-1] not in ".:?!" or "|" in text or "    " in paragraph.strip():
        return None
    plain = sum(bool(PLAIN_WORD.match(w)) for w in words) / len(words)
    return text if plain >= 0.7 else None


def documents(deb: Path) -> dict[str, list[str]]:
    """Document path (without .rst.txt) -> its prose paragraphs, repeats across the documentation dropped."""
    with tempfile.TemporaryDirectory() as folder:
        subprocess.run(["ar", "x", str(deb.resolve())], cwd=folder, check=True)
        data = next(Path(folder).glob("data.tar.*"))
        with tarfile.open(data) as archive:
            members = sorted((m for m in archive.getmembers() if m.name.startswith(SOURCES)
                              and m.name.endswith(".rst.txt")), key=lambda m: m.name)
            sources = {m.name[len(SOURCES):-len(".rst.txt")]: archive.extractfile(m).read().decode("utf-8")
                       for m in members}
    seen, result = set(), {}
    for name, source in sources.items():
        kept = []
        for paragraph in blocks(source):
            text = prose(paragraph)
            if text is not None and text not in seen:
                seen.add(text)
                kept.append(text)
        if kept:
            result[name] = kept
    return result


def fetch(folder: Path) -> Path:
    """Download the pinned package into ``folder`` (apt-get download; needs Debian's package lists)."""
    result = subprocess.run(["apt-get", "download", f"{PACKAGE}={VERSION}"], cwd=folder, capture_output=True,
                            text=True)
    if result.returncode != 0:
        raise RuntimeError(f"apt-get download {PACKAGE}={VERSION} failed: {result.stderr.strip()[-500:]}")
    return next(folder.glob(f"{PACKAGE}_*.deb"))


def write(deb: Path, out: Path = OUT) -> str:
    parts = [HEADER]
    for name, paragraphs in documents(deb).items():
        parts.append(f"## {name}\n")
        parts.extend(p + "\n" for p in paragraphs)
    text = "".join(parts)
    buffer = io.BytesIO()
    with lzma.open(buffer, "wb", preset=9 | lzma.PRESET_EXTREME) as f:  # xz: the same bytes on every machine
        f.write(text.encode("utf-8"))
    out.write_bytes(buffer.getvalue())
    return text


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--deb", type=Path, help=f"the {PACKAGE} package file (default: apt-get download it)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        deb = args.deb or fetch(Path(folder))
        text = write(deb, args.out)
    print(f"wrote {args.out}: {args.out.stat().st_size:,} bytes, {len(text):,} characters")


if __name__ == "__main__":
    main(sys.argv[1:])
