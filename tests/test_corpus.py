"""tfm.corpus: the shipped text is what tools/corpus/make_corpus.py writes, each topic has one label, and the labelled
task keeps its test paragraphs out of training and out of the pretraining text."""

from __future__ import annotations

import subprocess
import sys
from importlib.resources import files
from pathlib import Path

import pytest

from tfm import corpus

ROOT = Path(__file__).resolve().parents[1]


def test_every_topic_belongs_to_exactly_one_part():
    listed = [topic for topics in corpus.PARTS.values() for topic in topics]
    assert len(listed) == len(set(listed))
    assert sorted(listed) == sorted(corpus.topics())
    assert corpus.part_of("with") == "statements"
    with pytest.raises(KeyError, match="unknown topic 'nope'"):
        corpus.part_of("nope")


def test_the_corpus_is_prose_of_a_useful_size():
    words = corpus.text().split()
    assert 45_000 < len(words) < 55_000
    assert all(p[-1] in ".:" and len(p.split()) >= 6 for p in corpus.paragraphs())


@pytest.mark.skipif(sys.version_info[:3] != (3, 11, 7), reason="the snapshot was made from Python 3.11.7's pydoc_data")
def test_the_snapshot_is_what_make_corpus_writes(tmp_path):
    shipped = files("tfm").joinpath("corpora", corpus.CORPUS_FILE).read_text(encoding="utf-8")
    out = tmp_path / "corpus.txt"
    subprocess.run([sys.executable, "-m", "tools.corpus.make_corpus", str(out)], check=True, capture_output=True,
                   cwd=ROOT)
    assert out.read_text(encoding="utf-8") == shipped


def test_sentence_task_keeps_test_paragraphs_out_of_training_and_pretraining():
    task = corpus.sentence_task(test_per_label=50)
    assert set(task.train.paragraph_ids).isdisjoint(task.test.paragraph_ids)
    test_paragraphs = {corpus.paragraphs()[i] for i in task.test.paragraph_ids}
    assert test_paragraphs.isdisjoint(task.pretraining_text)
    assert set(task.train.sentences).isdisjoint(task.test.sentences)
    assert not any(s in p for s in task.test.sentences for p in task.pretraining_text)
    assert len(task.pretraining_text) + len(set(task.test.paragraph_ids)) > 0.95 * len(set(corpus.paragraphs()))
    for label in range(len(corpus.LABELS)):
        assert task.test.labels.count(label) >= 50
        assert task.train.labels.count(label) >= 150
    for sentence, label, paragraph in zip(task.test.sentences, task.test.labels, task.test.paragraph_ids,
                                          strict=True):
        assert sentence in corpus.paragraphs()[paragraph] and len(sentence.split()) >= 6
        topic = next(t for t, ps in corpus.topics().items() if corpus.paragraphs()[paragraph] in ps)
        assert corpus.LABELS[label] == corpus.part_of(topic)
    assert corpus.sentence_task(test_per_label=50) == task, "the split depends on the seed only"
    assert corpus.sentence_task(test_per_label=50, seed=1).test != task.test


def test_sentence_task_rejects_impossible_requests():
    with pytest.raises(ValueError, match="more than the corpus has"):
        corpus.sentence_task(test_per_label=400)
    with pytest.raises(ValueError, match="test_per_label"):
        corpus.sentence_task(test_per_label=0)


def test_sentences_split_after_a_full_stop_before_a_capital():
    assert corpus.split_sentences('A dict maps keys. "x" is a str. e.g. this stays.') == [
        "A dict maps keys.", '"x" is a str. e.g. this stays.']
