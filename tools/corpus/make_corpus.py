"""Write tfm's English corpus, ``src/tfm/corpora/python_reference.txt``, from the text that ships with Python.

Source: ``pydoc_data.topics`` of CPython (the text ``help("with")`` shows), generated from the Python Language
Reference and Library Reference. Python's documentation is under the PSF License Agreement, version 2, which allows
copying it with its notice (kept in the file's header). The snapshot is fixed (made with Python 3.11.7) so that every
machine, and Colab's other Python version, reads the same text.

Kept: paragraphs of prose. Dropped: headings, grammar rules and code, i.e. paragraphs of fewer than six words, not
ending with "." or ":", or with fewer than 75% plain words. Run once: ``python -m tools.corpus.make_corpus [OUT]``.
"""

from __future__ import annotations

import pydoc_data.topics
import re
import sys
from pathlib import Path

from tools import ROOT

OUT = ROOT / "src" / "tfm" / "corpora" / "python_reference.txt"
PLAIN_WORD = re.compile(r"^[A-Za-z][A-Za-z’'-]*[,.;:]?$")
PYTHON = ".".join(map(str, sys.version_info[:3]))
HEADER = f"""\
# tfm corpus: prose paragraphs of Python's documentation, one paragraph a line, under '## <topic>' lines.
# Source: CPython {PYTHON}, Lib/pydoc_data/topics.py (the text of help(topic)), taken from the
# Python Language Reference and Library Reference. Copyright (c) 2001 Python Software Foundation; All Rights Reserved.
# Licensed under the PSF License Agreement, version 2 (https://docs.python.org/3/license.html).
# Kept: prose paragraphs only (tools/corpus/make_corpus.py in the book's repository says how they were chosen).
"""


def prose_paragraphs(text: str) -> list[str]:
    paragraphs, lines = [], []
    for line in text.split("\n") + [""]:
        stripped = line.strip()
        if not stripped or set(stripped) <= set("*=-"):
            if lines:
                paragraphs.append(" ".join(lines))
            lines = []
        else:
            lines.append(stripped)
    kept = []
    for paragraph in paragraphs:
        words = paragraph.split()
        plain = sum(bool(PLAIN_WORD.match(w)) for w in words) / len(words)
        if len(words) >= 6 and paragraph[-1] in ".:" and plain >= 0.75:
            kept.append(" ".join(words))
    return kept


def main(out: Path = OUT) -> None:
    parts = [HEADER]
    for topic in sorted(pydoc_data.topics.topics):
        parts.append(f"## {topic}\n")
        parts.extend(p + "\n" for p in prose_paragraphs(pydoc_data.topics.topics[topic]))
    out.write_text("".join(parts), encoding="utf-8")
    print(f"wrote {out}: {out.stat().st_size:,} bytes")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)
