"""tfm.pydocs: chapter 14's corpus is what tools/corpus/make_docs_corpus.py writes, split by whole documents into
parts that share no document and no paragraph, with nested training subsets and a leakage check that finds what it
should."""

from __future__ import annotations

import lzma
import shutil
import subprocess
import sys
from importlib.resources import files
from pathlib import Path

import pytest
import torch

from tfm import pydocs

ROOT = Path(__file__).resolve().parents[1]


def test_the_split_shares_no_document_and_no_paragraph():
    parts = pydocs.split()
    names = [set(v) for v in parts.values()]
    assert all(not (a & b) for i, a in enumerate(names) for b in names[i + 1:])
    assert set().union(*names) == set(pydocs.documents())
    paragraphs = {part: {p for name in docs for p in pydocs.documents()[name]} for part, docs in parts.items()}
    assert not paragraphs["train"] & (paragraphs["validation"] | paragraphs["test"])
    assert len(parts["validation"]) + len(parts["test"]) == len(pydocs.documents()) // pydocs.HELD_OUT_EVERY


def test_the_corpus_is_large_and_made_of_characters():
    corpus = pydocs.char_corpus()
    assert 4_000_000 < len(corpus.train) < 4_500_000 and 150_000 < len(corpus.test) < 300_000
    assert corpus.alphabet[0] == pydocs.UNKNOWN and " " in corpus.alphabet and "\n" in corpus.alphabet
    assert corpus.n_vocab < 100
    sample = "Return the value of x.\n"
    assert corpus.decode(corpus.encode(sample)) == sample
    assert corpus.encode("π")[0] == 0  # a rare character is UNKNOWN
    text = pydocs.text(pydocs.split()["test"])
    assert corpus.decode(corpus.test[:1000]) == text[:1000]


def test_training_subsets_are_nested_prefixes():
    corpus = pydocs.char_corpus()
    small, large = corpus.training_subset(130_000), corpus.training_subset(1_300_000)
    assert torch.equal(large[:130_000], small)
    with pytest.raises(ValueError, match=r"between 1 and 4,\d{3},\d{3} characters .* got 9,000,000"):
        corpus.training_subset(9_000_000)


def test_the_leakage_check_finds_copied_text():
    corpus = pydocs.char_corpus()
    assert pydocs.shared_runs(corpus.train, corpus.train[1000:50_000], 32) == 1.0  # training text: all found
    random = torch.randint(1, corpus.n_vocab, (20_000,), generator=torch.Generator().manual_seed(0))
    assert pydocs.shared_runs(corpus.train, random, 16) == 0.0
    assert pydocs.shared_runs(corpus.train, corpus.test, 64) < 0.02
    with pytest.raises(ValueError, match="longer than n = 64"):
        pydocs.shared_runs(corpus.train, corpus.test[:10], 64)


@pytest.mark.skipif(shutil.which("apt-get") is None or shutil.which("ar") is None, reason="needs Debian's apt-get")
def test_the_snapshot_is_what_make_docs_corpus_writes(tmp_path):
    shipped = lzma.decompress(files("tfm").joinpath("corpora", pydocs.CORPUS_FILE).read_bytes())
    out = tmp_path / "docs.txt.xz"
    result = subprocess.run([sys.executable, "-m", "tools.corpus.make_docs_corpus", "--out", str(out)],
                            capture_output=True, text=True, cwd=ROOT)
    if result.returncode != 0 and "apt-get download" in result.stderr:
        pytest.skip("the package python3.11-doc could not be downloaded here")
    assert result.returncode == 0, result.stderr[-2000:]
    assert lzma.decompress(out.read_bytes()) == shipped
