"""tfm stays small enough to read in an afternoon: about 1,500 lines of code, no module over 400."""

from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "tfm"


def code_lines(path: Path) -> int:
    return sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


def test_modules_are_small():
    sizes = {p.name: code_lines(p) for p in SRC.glob("*.py")}
    assert max(sizes.values()) <= 400, sizes
    assert sum(sizes.values()) <= 1500, f"tfm has grown to {sum(sizes.values())} non-blank lines: {sizes}"
