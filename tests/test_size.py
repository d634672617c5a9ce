"""tfm stays small enough to read in an afternoon: the reference implementation about 1,700 lines of code, no module
over 400; the helpers single chapters add (text, cost, vision, tokens, pretraining, and for the part "Language models
today" the modern block, the count baselines and the in-context measurements, for the assistant LoRA and the
preference losses) are counted apart, and the whole package stays under 5,100 lines."""

from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "tfm"
CORE = {"__init__.py", "attention.py", "masks.py", "multihead.py", "positional.py", "embedding.py", "layers.py",
        "model.py", "decoding.py", "training.py", "data.py", "interop.py", "check.py", "viz.py", "device.py"}


def code_lines(path: Path) -> int:
    return sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


def test_modules_are_small():
    sizes = {p.name: code_lines(p) for p in SRC.glob("*.py")}
    assert max(sizes.values()) <= 400, sizes
    core = sum(n for name, n in sizes.items() if name in CORE)
    # 1,650: training gained accumulation, autocast and early stopping (chapters 6 and 16), decoding top-p (chapter 14);
    # 1,750: check gained page-wide messages and `without` (a one-call answer fails), attention rotary positions;
    # 1,800: `without` refuses PyTorch operations, methods and classes by their module, factor_hint names two slips,
    # train uses DDP's no_sync; 1,850: `without` also refuses the answers' code objects (a profile hook) and the
    # kernels under an operation (a dispatch mode); 1,875: check_answer names the kind of answer it wanted and the
    # one it got (text typed where a number is asked for)
    assert core <= 1875, f"tfm's core has grown to {core} non-blank lines: {sizes}"
    # 3,700 for sixteen chapters (pretraining, lm, ngram, incontext, modern and distributed serve chapters 13-16);
    # 4,300 with chapter 14's modified Kneser-Ney, its documentation corpus and the circuits read from weights;
    # 4,400 with its context-swap control and induction oracle (context_use); 4,500 with the refusals above and
    # chapter 11's watch for rows of scores against all keys (cost.key_length_tensors); 4,520 with train_on_stream's
    # weight decay kept off norm gains and biases (chapter 15's comparison); 4,550 with chapter 16's ring checks
    # that track each message's contents and slip_hint naming the nearest of two slips; 5,100 with the assistant
    # part's LoRA, DPO and GRPO losses, chat template and packing (lora, preference, chat)
    assert sum(sizes.values()) <= 5100, f"tfm has grown to {sum(sizes.values())} non-blank lines: {sizes}"
