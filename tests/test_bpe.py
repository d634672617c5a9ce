"""tfm.bpe: merges worked out by hand, the same merges and tokens as Hugging Face tokenizers, and clear errors."""

from __future__ import annotations

import json
import random
from collections import Counter
from itertools import pairwise

import pytest

import tfm.corpus
from tfm.bpe import BPETokenizer, initial_alphabet, merge_pair, pre_tokenize, symbols_of, train_bpe, word_counts

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
# Sennrich et al. (2016)'s example: ids 0-4 specials, 5-14 "d e i l n o r s t w", 15-17 "r</w> t</w> w</w>"
CLASSIC = {"low": 5, "lower": 2, "newest": 6, "widest": 3}


def test_merges_worked_out_by_hand():
    tok = train_bpe(CLASSIC, 100)
    assert tok.vocab[:18] == SPECIALS + list("deilnorstw") + ["r</w>", "t</w>", "w</w>"]
    # 1. e s (9) and s t</w> (9) tie; (e, s) = (6, 12) has the smaller ids. 2. es t</w> (9). 3. l o (7).
    # 4. n e, e w and w est</w> tie at 6; (e, w) = (6, 14) is smallest. 5. n ew (6). 6. new est</w> (6).
    # 7. lo w</w> (5).
    # 8. w i, i d and d est</w> tie at 3: d (id 5) first. 9. i dest</w>. 10. w idest</w>.
    # 11. lo w, w e and e r</w> tie at 2: e (id 6) first. 12. w er</w>. 13. lo wer</w>. Then every pair occurs once.
    assert tok.merges == [("e", "s"), ("es", "t</w>"), ("l", "o"), ("e", "w"), ("n", "ew"), ("new", "est</w>"),
                          ("lo", "w</w>"), ("d", "est</w>"), ("i", "dest</w>"), ("w", "idest</w>"), ("e", "r</w>"),
                          ("w", "er</w>"), ("lo", "wer</w>")]
    assert len(tok) == 18 + 13
    first_seven = BPETokenizer(tok.vocab, tok.merges[:7])
    assert first_seven.split_word("lowest") == ["lo", "w", "est</w>"]  # (e,s), (es,t</w>), (l,o); no (lo,w) yet
    assert first_seven.split_word("newer") == ["new", "e", "r</w>"]  # (e,w) at the left first, then (n,ew)
    assert tok.split_word("lower") == ["lower</w>"] and tok.split_word("widest") == ["widest</w>"]
    assert train_bpe(CLASSIC, 3).merges == tok.merges[:3]  # fewer merges: a prefix of the longer run
    for n in (0, 3, 13):
        fewer, first = train_bpe(CLASSIC, n), tok.first_merges(n)
        assert (fewer.vocab, fewer.merges) == (first.vocab, first.merges)


def test_split_word_merges_leftmost_first():
    # a a a a</w>: the merge (a, a) fits at 0 and at 1; the leftmost wins, as in tokenizers and in training
    tok = BPETokenizer(["a", "a</w>", "aa"], [("a", "a")], special_tokens=())
    assert tok.split_word("aaaa") == ["aa", "a", "a</w>"]  # not ["a", "aa", "a</w>"]
    assert tok.split_word("aaaaa") == ["aa", "aa", "a</w>"]
    assert train_bpe({"aaaa": 5}, 1, special_tokens=()).split_word("aaaa") == ["aa", "a", "a</w>"]


def test_min_count_stops_training():
    assert len(train_bpe(CLASSIC, 100, min_count=3).merges) == 10  # merges 11-13 occur only twice
    assert len(train_bpe({**CLASSIC, "hug": 1}, 100).merges) == 13  # h u g</w> occurs once: never merged
    assert len(train_bpe({**CLASSIC, "hug": 1}, 100, min_count=1).merges) == 15  # unless pairs seen once may merge


def test_encode_decode_round_trip():
    counts = word_counts(tfm.corpus.paragraphs()[:200])
    tok = train_bpe(counts, 300)
    text = "The with statement is used to wrap the execution of a block"
    ids = tok.encode(text)
    assert all(isinstance(i, int) for i in ids)
    assert tok.decode(ids) == text
    assert tok.decode(tok.encode("a, b")) == "a , b"  # words come back separated by single spaces
    assert tok.tokenize("x ☃") == ["x</w>", "[UNK]"]  # an unseen character is unknown, not an error


def test_bad_input_raises_clear_errors():
    tok = train_bpe(CLASSIC, 5)
    with pytest.raises(ValueError, match="n_merges"):
        train_bpe(CLASSIC, -1)
    with pytest.raises(ValueError, match="min_count"):
        train_bpe(CLASSIC, 5, min_count=0)
    with pytest.raises(ValueError, match="no word"):
        train_bpe({}, 5)
    with pytest.raises(ValueError, match=r"alphabet lacks .*'w</w>'"):
        train_bpe(CLASSIC, 5, alphabet=list("deilnorstw") + ["r</w>", "t</w>"])
    with pytest.raises(ValueError, match="twice"):
        train_bpe(CLASSIC, 5, alphabet=initial_alphabet(CLASSIC) + ["e"])
    with pytest.raises(ValueError, match="n_merges must be between 0 and 5"):
        tok.first_merges(6)
    with pytest.raises(ValueError, match="empty word"):
        tok.split_word("")
    with pytest.raises(ValueError, match="token id 999 is outside"):
        tok.decode([5, 999])
    with pytest.raises(KeyError, match="'zebra' is not in the vocabulary"):
        tok.id_of("zebra")
    with pytest.raises(TypeError, match="not one string"):
        word_counts("a whole text")
    no_unk = train_bpe(CLASSIC, 5, special_tokens=())
    with pytest.raises(KeyError, match="no unknown token"):
        no_unk.tokenize("low ☃")


def split_topics() -> tuple[list[str], list[str]]:
    """Every fourth topic is held out, as in chapter 12."""
    topics = tfm.corpus.topics()
    held = list(topics)[3::4]
    train = [p for name, ps in topics.items() if name not in held for p in ps]
    return train, [p for name in held for p in topics[name]]


def hf_bpe(paragraphs: list[str], vocab_size: int):
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.Tokenizer(tokenizers.models.BPE(unk_token="[UNK]", end_of_word_suffix="</w>"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    trainer = tokenizers.trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=SPECIALS,
                                             end_of_word_suffix="</w>", show_progress=False)
    tok.train_from_iterator(paragraphs, trainer)
    return tok


@pytest.mark.parametrize("vocab_size", [600, 100_000])
def test_same_merges_vocabulary_and_tokens_as_hugging_face(vocab_size):
    train, held_out = split_topics()
    hf = hf_bpe(train, vocab_size)
    model = json.loads(hf.to_str())["model"]
    hf_vocab = sorted(model["vocab"], key=model["vocab"].get)  # tokens by id
    hf_merges = [tuple(m) for m in model["merges"]]
    counts = word_counts(train)
    ours = train_bpe(counts, len(hf_merges))
    # The special tokens and the characters get the same ids; the end-of-word symbols are the same ones, but
    # tokenizers numbers them in the (per-process random) order of a hash map, where tfm sorts them.
    alphabet = initial_alphabet(counts)
    n_chars = len({ch for w in counts for ch in w})
    assert hf_vocab[:5 + n_chars] == ours.vocab[:5 + n_chars]
    assert sorted(hf_vocab[5 + n_chars:5 + len(alphabet)]) == alphabet[n_chars:]
    # Given tokenizers' order, tfm learns exactly its merges and vocabulary, and splits held-out text the same way.
    same = train_bpe(counts, len(hf_merges), alphabet=hf_vocab[5:5 + len(alphabet)])
    assert same.merges == hf_merges
    assert same.vocab == hf_vocab
    for paragraph in held_out[::5]:
        assert same.tokenize(paragraph) == hf.encode(paragraph).tokens
    # In tfm's own order, the merges agree up to the first tie that the order of the end-of-word symbols decides
    # (merge 1,238; see test_order_of_word_final_symbols_matters_from_merge_1238), whatever tokenizers' order was.
    assert ours.merges[:1237] == hf_merges[:1237]
    if vocab_size > len(hf_vocab):  # trained to the end (min_frequency 2): both learn every merge there is
        assert len(hf_merges) == len(train_bpe(counts, 10**9).merges)


def first_order_dependent_merge(counts, min_count: int = 2) -> tuple[int | None, list[tuple[str, str]]]:
    """Train plainly (recounting only the words a merge touches) and return the index of the first merge whose choice
    depends on how the initial end-of-word symbols are numbered (None if none does), with the merges before it.

    An end-of-word symbol such as "s</w>" only ever ends a word, so it is only ever the second symbol of a pair. Ties
    go to the smallest (id of a, id of b); the ids of characters (by code point) and of merged symbols (in the order
    they are made) do not depend on that numbering. So the numbering decides a merge only when, among the most
    frequent pairs with the smallest first symbol, no second symbol is a character and two or more are end-of-word
    symbols. Until then every numbering, tokenizers' random ones included, makes the same merges (by induction)."""
    alphabet = initial_alphabet(counts)
    word_final = {s for s in alphabet if s.endswith("</w>")}
    characters = set(alphabet) - word_final
    ids = {s: i for i, s in enumerate(alphabet)}
    words = [symbols_of(w) for w in counts]
    weights = list(counts.values())
    pairs: Counter = Counter()
    where: dict[tuple[str, str], set[int]] = {}
    for k, symbols in enumerate(words):
        for pair in pairwise(symbols):
            pairs[pair] += weights[k]
            where.setdefault(pair, set()).add(k)
    merges = []
    while pairs and max(pairs.values()) >= min_count:
        top = max(pairs.values())
        tied = [p for p, c in pairs.items() if c == top]
        first = min(ids[a] for a, _ in tied)
        seconds = [b for a, b in tied if ids[a] == first]
        if sum(b in word_final for b in seconds) > 1 and not any(b in characters for b in seconds):
            return len(merges), merges
        a, b = min(tied, key=lambda p: (ids[p[0]], ids[p[1]]))
        merges.append((a, b))
        ids.setdefault(a + b, len(ids))
        for k in where.pop((a, b)):
            for pair in pairwise(words[k]):
                pairs[pair] -= weights[k]
                if not pairs[pair]:
                    del pairs[pair]
            words[k] = merge_pair(words[k], a, b)
            for pair in pairwise(words[k]):
                pairs[pair] += weights[k]
                where.setdefault(pair, set()).add(k)
    return None, merges


def test_order_of_word_final_symbols_matters_from_merge_1238():
    counts = word_counts(split_topics()[0])
    first, merges = first_order_dependent_merge(counts)
    assert first == 1237  # merge 1,238, as chapter 12 says
    assert merges == train_bpe(counts, first).merges  # the plain count makes tfm.bpe's merges
    alphabet = initial_alphabet(counts)
    n_chars = len({ch for w in counts for ch in w})
    reference = train_bpe(counts, first + 50)
    rng = random.Random(0)
    for _ in range(3):  # any numbering: the same first 1,237 merges
        finals = alphabet[n_chars:]
        rng.shuffle(finals)
        assert train_bpe(counts, first, alphabet=alphabet[:n_chars] + finals).merges == reference.merges[:first]
    reverse = train_bpe(counts, first + 50, alphabet=alphabet[:n_chars] + alphabet[n_chars:][::-1])
    assert reverse.merges[first] != reference.merges[first]  # and merge 1,238 can differ
    assert first_order_dependent_merge(CLASSIC)[0] is None  # no tie there is decided by the end-of-word symbols


def test_pre_tokenize_is_hugging_face_whitespace():
    tokenizers = pytest.importorskip("tokenizers")
    text = "x = f(a, b) ** 2  # it's __init__'s job; 3.14 ≥ π!"
    hf = [piece for piece, _ in tokenizers.pre_tokenizers.Whitespace().pre_tokenize_str(text)]
    assert pre_tokenize(text) == hf
