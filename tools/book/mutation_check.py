"""Break tfm on purpose, one mutation at a time, and check that the test suite notices each one.

Usage: python -m tools.book.mutation_check   (restores every file; exits 1 if a mutation survives)
"""

from __future__ import annotations

import subprocess
import sys

from tools import ROOT

SRC = ROOT / "src" / "tfm"

MUTATIONS = [  # (file, original text, broken text, what it breaks)
    ("attention.py", "/ math.sqrt(d_k)", "", "no scaling by sqrt(d_k)"),
    ("attention.py", "torch.softmax(scores, dim=-1)", "torch.softmax(scores, dim=-2)", "softmax over queries"),
    ("attention.py", "weights = weights.masked_fill(~has_key, 0.0)", "pass", "fully masked rows not zeroed"),
    ("multihead.py", "x.view(B, T, self.n_heads, self.d_k).transpose(1, 2)",
     "x.reshape(B, self.n_heads, T, self.d_k)", "reshape without transpose"),
    ("multihead.py", "k = torch.cat([cache[\"k\"], k], dim=2)", "k = k", "cache keys not appended"),
    ("layers.py", "return norm(x + dropout(sublayer(x)))", "return norm(dropout(sublayer(x)))", "no residual"),
    ("masks.py", "ones.tril(diagonal=n_keys - n_queries)", "ones.triu(diagonal=n_keys - n_queries)",
     "anti-causal mask"),
    ("positional.py", "table[:, 1::2] = torch.cos(position * frequency)",
     "table[:, 1::2] = torch.sin(position * frequency)", "sin instead of cos"),
    ("embedding.py", "math.sqrt(d_model) if scale", "1.0 if scale", "no sqrt(d_model) scaling"),
    ("training.py", "loss = (1.0 - self.smoothing) * nll + self.smoothing * uniform", "loss = nll",
     "label smoothing ignored"),
    ("interop.py", '("query", "key", "value")', '("query", "query", "value")', "keys made with the query weights"),
    ("decoding.py", "logits[:, -1].argmax(-1)", "logits[:, 0].argmax(-1)", "greedy reads the wrong position"),
]


def main() -> int:
    survivors = []
    for name, original, broken, what in MUTATIONS:
        path = SRC / name
        text = path.read_text(encoding="utf-8")
        if original not in text:
            print(f"?? {what}: pattern not found in {name}")
            survivors.append(what)
            continue
        path.write_text(text.replace(original, broken, 1), encoding="utf-8")
        try:
            slow = [f"--ignore=tests/test_{name}.py" for name in ("browser", "grading", "pdf", "slides")]  # the
            # course kit's and the website's tests build and grade the book; tfm's own tests must catch it alone
            result = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "tests", *slow],
                                    capture_output=True, text=True)
        finally:
            path.write_text(text, encoding="utf-8")
        caught = result.returncode != 0
        print(f"{'caught  ' if caught else 'SURVIVED'} {what}")
        if not caught:
            survivors.append(what)
    print(f"{len(MUTATIONS) - len(survivors)} of {len(MUTATIONS)} mutations caught")
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
