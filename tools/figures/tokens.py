"""The schematic of chapter 12 (tokens), drawn with the helpers of style.py; `python -m tools.figures` draws every
figure. The tokens and ids drawn are computed here with tfm.bpe, trained as in chapter 12.
"""

from __future__ import annotations

import tfm.bpe
import tfm.corpus
from tools.figures.style import (
    BLUE,
    GREY,
    LIGHT_BLUE,
    LIGHT_GREEN,
    LIGHT_GREY,
    LIGHT_ORANGE,
    arrow,
    box,
    fs,
    grid,
    new_figure,
    save,
)

TEXT = "the bitwise inversion of x"


def chapter_bpe() -> tfm.bpe.BPETokenizer:
    """The BPE of chapter 12: every fourth topic held out, trained until no pair occurs twice."""
    topics = tfm.corpus.topics()
    held_out = list(topics)[3::4]
    paragraphs = [p for name, ps in topics.items() if name not in held_out for p in ps]
    return tfm.bpe.train_bpe(tfm.bpe.word_counts(paragraphs), n_merges=10_000)


def text_to_rows() -> None:
    bpe = chapter_bpe()
    words = tfm.bpe.pre_tokenize(TEXT)
    pieces = [bpe.split_word(w) for w in words]  # one list of tokens per word
    tokens = [t for p in pieces for t in p]
    ids = [bpe.id_of(t) for t in tokens]
    assert pieces[2] == ["in", "version</w>"]  # the held-out word splits into two known pieces

    fig, ax = new_figure(11.0, 5.1, font_scale=1.1)
    pitch, w, h = 1.38, 1.28, 0.42  # one token column
    x0 = 2.2
    xs = [x0 + i * pitch for i in range(len(tokens))]  # left edge of each token column
    rows_y = {"text": 4.5, "words": 3.5, "tokens": 2.5, "ids": 1.5}
    for name, y in rows_y.items():
        ax.text(0.2, y + h / 2, name, ha="left", va="center", fontsize=fs(12), fontweight="bold")

    right = xs[-1] + w
    box(ax, x0, rows_y["text"], right - x0, h, f"“{TEXT}”", face=LIGHT_GREY, size=12)
    # words: one box per word, as wide as its tokens
    k = 0
    for word, p in zip(words, pieces, strict=True):
        left, width = xs[k], xs[k + len(p) - 1] + w - xs[k]
        box(ax, left, rows_y["words"], width, h, word, face=LIGHT_ORANGE if len(p) > 1 else "white", size=11)
        for j, token in enumerate(p):
            box(ax, xs[k + j], rows_y["tokens"], w, h, token, face=LIGHT_ORANGE if len(p) > 1 else LIGHT_BLUE,
                size=10)
            box(ax, xs[k + j], rows_y["ids"], w, h, str(ids[k + j]), face="white", size=11)
        k += len(p)
    notes = [("text", "words", "pre-tokenization: split at spaces and punctuation"),
             ("words", "tokens", "BPE: replay the learned merges inside each word\n(orange: a word never seen in "
                                   "training, in two known pieces)"),
             ("tokens", "ids", "vocabulary: look up each token's id")]
    for upper, lower, note in notes:
        mid = (rows_y[upper] + rows_y[lower] + h) / 2
        arrow(ax, (x0 - 0.25, rows_y[upper] + 0.02), (x0 - 0.25, rows_y[lower] + h - 0.02), colour=GREY)
        ax.text(x0 - 0.1, mid, note, ha="left", va="center", fontsize=fs(10), color=GREY, linespacing=1.15)

    # the ids pick rows of the embedding matrix: X = E[ids], one row of d_model numbers per token
    cell, d, top = 0.16, 6, 1.0
    for x in xs:
        arrow(ax, (x + w / 2, rows_y["ids"] - 0.02), (x + w / 2, top + 0.02), colour=BLUE)
        grid(ax, x + (w - d * cell) / 2, top, 1, d, cell, face=LIGHT_GREEN)
    ax.text(0.2, top - cell / 2, "rows of $E$", ha="left", va="center", fontsize=fs(12), fontweight="bold")
    n_vocab = f"{len(bpe):,}".replace(",", "{,}")  # mathtext would put a space after a bare comma
    ax.text(x0 - 0.1, top - cell - 0.1, f"$X$: the $T = {len(tokens)}$ rows of the embedding matrix $E$ that the ids "
            f"pick, each $d_{{\\mathrm{{model}}}}$ wide;\n$E$ has $n_{{\\mathrm{{vocab}}}} = {n_vocab}$ rows",
            ha="left", va="top", fontsize=fs(10), color=GREY, linespacing=1.3)
    save(fig, "text_to_rows.svg")


FIGURES = [text_to_rows]

if __name__ == "__main__":
    for draw in FIGURES:
        draw()
