"""A small English corpus that ships with tfm, and a labelled task derived from it.

The text is the prose of Python's own documentation: the paragraphs that ``help("with")`` and the other
``pydoc_data`` topics show (about 49,000 words in 79 topics, PSF License; ``tools/make_corpus.py`` made the snapshot
from Python 3.11.7, so every machine and Python version reads the same text). Chapters 12 and 13 train tokenizers and
a masked language model on it.

The labelled task: which part of the documentation a sentence comes from. Each topic belongs to one of four parts
(:data:`PARTS`): statements, expressions, built-in types, the data model. The label is a fact about where the sentence
was written, not a judgement made for the book.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from functools import cache
from importlib.resources import files

CORPUS_FILE = "python_reference.txt"

# Each pydoc topic in one part of the documentation (every topic of the corpus appears exactly once; tested).
PARTS: dict[str, tuple[str, ...]] = {
    "statements": (
        "assert", "assignment", "async", "augassign", "break", "class", "compound", "continue", "del", "else", "for",
        "function", "global", "if", "import", "nonlocal", "pass", "raise", "return", "try", "while", "with",
    ),
    "expressions": (
        "atom-identifiers", "atom-literals", "attribute-references", "await", "binary", "bitwise", "booleans", "calls",
        "comparisons", "conversions", "exprlists", "in", "lambda", "operator-summary", "power", "shifting", "slicings",
        "subscriptions", "unary", "yield",
    ),
    "built-in types": (
        "bltin-code-objects", "bltin-ellipsis-object", "bltin-null-object", "bltin-type-objects", "dict", "floating",
        "formatstrings", "identifiers", "imaginary", "integers", "lists", "numbers", "string-methods", "strings",
        "truth", "typesfunctions", "typesmapping", "typesmethods", "typesmodules", "typesseq", "typesseq-mutable",
    ),
    "data model": (
        "attribute-access", "callable-types", "context-managers", "customization", "debugger", "dynamic-features",
        "exceptions", "execmodel", "id-classes", "naming", "numeric-types", "objects", "sequence-types",
        "specialattrs", "specialnames", "types",
    ),
}
LABELS = tuple(PARTS)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"*])")


@cache
def topics() -> dict[str, tuple[str, ...]]:
    """Topic name -> its prose paragraphs, in the order of the file (topics sorted by name)."""
    return sections(files("tfm").joinpath("corpora", CORPUS_FILE).read_text(encoding="utf-8"))


def sections(text: str) -> dict[str, tuple[str, ...]]:
    """A corpus file's ``## name`` sections -> their paragraphs (one per non-empty line; other ``#`` lines are
    comments), in the file's order. The format of both shipped corpora (this one and :mod:`tfm.pydocs`)."""
    result: dict[str, list[str]] = {}
    name = None
    for line in text.splitlines():
        if line.startswith("## "):
            name = line[3:]
            result[name] = []
        elif line and not line.startswith("#"):
            result[name].append(line)
    return {key: tuple(paragraphs) for key, paragraphs in result.items()}


def paragraphs() -> list[str]:
    """Every paragraph of the corpus, in file order."""
    return [p for ps in topics().values() for p in ps]


def text() -> str:
    """The whole corpus as one string, one paragraph a line."""
    return "\n".join(paragraphs())


def split_sentences(paragraph: str) -> list[str]:
    """Split a paragraph after '.', '!' or '?' followed by a space and a capital letter or a quote."""
    return [s for s in _SENTENCE_END.split(paragraph) if s]


def part_of(topic: str) -> str:
    """The part of the documentation (a label of :data:`LABELS`) that ``topic`` belongs to."""
    for part, names in PARTS.items():
        if topic in names:
            return part
    raise KeyError(f"unknown topic {topic!r}; topics are those of tfm.corpus.topics()")


@dataclass(frozen=True)
class LabelledSentences:
    """Sentences with the index of their part (into :data:`LABELS`), and the paragraphs they come from."""

    sentences: list[str]
    labels: list[int]
    paragraph_ids: list[int]


@dataclass(frozen=True)
class SentenceTask:
    """A split of the labelled sentences by paragraph: no test paragraph shares a sentence with training, and
    ``pretraining_text`` (for self-supervised pretraining) holds every paragraph except the test ones."""

    train: LabelledSentences
    test: LabelledSentences
    pretraining_text: list[str]


def sentence_task(test_per_label: int = 60, min_words: int = 6, seed: int = 0) -> SentenceTask:
    """Sentences of at least ``min_words`` words labelled with their part; whole paragraphs go to the test set, at
    random (``seed``), until each label has at least ``test_per_label`` test sentences."""
    if test_per_label < 1:
        raise ValueError(f"test_per_label must be >= 1, got {test_per_label}")
    if min_words < 1:
        raise ValueError(f"min_words must be >= 1, got {min_words}")
    # Some paragraphs appear under several topics (help("augassign") repeats part of help("assignment")): each text
    # counts once, with the label of its first topic, so that no test paragraph has a copy in training.
    records: dict[int, tuple[str, list[str], int]] = {}  # paragraph id -> (text, sentences, label)
    seen: set[str] = set()
    for i, (topic, p) in enumerate((t, p) for t, ps in topics().items() for p in ps):
        if p not in seen:
            seen.add(p)
            sentences = [s for s in split_sentences(p) if len(s.split()) >= min_words]
            records[i] = (p, sentences, LABELS.index(part_of(topic)))
    order = list(records)
    random.Random(seed).shuffle(order)
    test_ids, counts = set(), [0] * len(LABELS)
    for i in order:
        _, sentences, label = records[i]
        if sentences and counts[label] < test_per_label:
            test_ids.add(i)
            counts[label] += len(sentences)
    if min(counts) < test_per_label:
        raise ValueError(f"test_per_label={test_per_label} is more than the corpus has for some label: {counts}")
    test_sentences = {s for i in test_ids for s in records[i][1]}

    def gather(ids: list[int], leave_out: set[str]) -> LabelledSentences:
        rows = [(s, records[i][2], i) for i in ids for s in records[i][1] if s not in leave_out]
        return LabelledSentences([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows])

    rest = [i for i in records if i not in test_ids]  # a sentence shared with a test paragraph stays out of both
    return SentenceTask(
        train=gather(rest, test_sentences),
        test=gather(sorted(test_ids), set()),
        pretraining_text=[records[i][0] for i in rest
                          if not any(s in records[i][0] for s in test_sentences)],
    )
