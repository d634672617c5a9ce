"""The rules that keep stored outputs true on every machine (CONTRIBUTING.md, "Stored outputs"): no printed float noise,
few and justified ignored cells, no wall-clock assertions, and every trained claim inside the robustness table."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "chapters").glob("*.ipynb"))
TABLE = ROOT / "appendices" / "robustness.json"


def code_cells(path: Path) -> list[dict]:
    return [c for c in json.loads(path.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "code"]


def source(cell: dict) -> str:
    return "".join(cell["source"])


def printed(cell: dict) -> str:
    return "".join("".join(o.get("text", "")) for o in cell.get("outputs", []) if o["output_type"] == "stream")


def ignored(cell: dict) -> bool:
    return "nbval-ignore-output" in cell["metadata"].get("tags", [])


def test_ignored_cells_are_at_most_a_tenth_of_the_book():
    cells = [c for path in NOTEBOOKS for c in code_cells(path)]
    share = sum(map(ignored, cells)) / len(cells)
    assert share <= 0.10, f"{share:.0%} of the book's code cells are excluded from nbval's comparison (limit 10%)"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_an_ignored_cell_says_why_and_asserts(path):
    for i, cell in enumerate(code_cells(path)):
        if ignored(cell):
            first = source(cell).splitlines()[0]
            assert first.startswith("# Output not compared:"), (
                f"{path.name}, code cell {i}: an ignored cell starts with '# Output not compared: <why>. "
                f"Asserted: <what>.', not {first!r}")
            asserts = re.search(r"^\s*assert |tfm\.check\.", source(cell), re.M)
            assert asserts, f"{path.name}, code cell {i} asserts nothing"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_notebook_asserts_a_wall_clock_time(path):
    # Budgets are checked by bench/time_chapters.py: a slow machine is not a wrong one.
    for i, cell in enumerate(code_cells(path)):
        assert not re.search(r"assert .*(_seconds|seconds_|elapsed) *(<|<=)", source(cell)), (
            f"{path.name}, code cell {i} asserts a wall-clock time")


# Printed float noise: a difference in scientific notation ("3.0e-08", "0.0e+00") or a long float ("0.0174555182").
NOISE = re.compile(r"\d\.\d+e-(0[5-9]|[1-9]\d)|\d\.\d{8,}|0\.0+e[-+]00")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_stored_outputs_print_bounds_not_float_noise(path):
    for i, cell in enumerate(code_cells(path)):
        if not ignored(cell):
            match = NOISE.search(printed(cell))
            assert not match, (f"{path.name}, code cell {i} prints {match.group()!r}: print the bound you assert "
                               "(e.g. 'max |a - b| < 1e-6: ok'), not the difference itself")


def claims() -> list[tuple[str, dict]]:
    return [(path.stem, claim) for path in NOTEBOOKS for cell in code_cells(path)
            for claim in cell["metadata"].get("claims", [])]


def test_every_trained_claim_holds_in_the_committed_robustness_table():
    table = json.loads(TABLE.read_text(encoding="utf-8"))
    assert table["seeds"] >= 5 and len(table["paths"]) >= 3, "the sweep needs >= 5 seeds x >= 3 numeric paths"
    assert re.match(r"Run on \d{4}-\d\d-\d\d on .+", table["stamp"]), "the table must state the date and machine"
    rows = {(row["chapter"], row["claim"]): row for row in table["claims"]}
    for chapter, claim in claims():
        row = rows.get((chapter, claim["name"]))
        assert row is not None, f"{chapter}: claim {claim['name']!r} is not in the robustness table: run the sweep"
        bound = claim.get("at_least", claim.get("at_most"))
        assert row["runs"] == table["seeds"] * len(table["paths"]), f"{chapter}: {claim['name']!r} missed runs"
        assert row["holds"], f"{chapter}: {claim['name']!r} fails in some run of the sweep: {row['values']}"
        if "at_least" in claim:
            assert row["min"] >= bound, f"{chapter}: {claim['name']!r} bound {bound} above the worst run {row['min']}"
        elif "at_most" in claim:  # (a claim without a bound is recorded, not asserted)
            assert row["max"] <= bound, f"{chapter}: {claim['name']!r} bound {bound} below the worst run {row['max']}"


def test_the_table_lists_no_claim_that_the_book_no_longer_makes():
    table = json.loads(TABLE.read_text(encoding="utf-8"))
    declared = {(chapter, claim["name"]) for chapter, claim in claims()}
    listed = [(row["chapter"], row["claim"]) for row in table["claims"]]
    stale = [key for key in listed if key not in declared]
    assert not stale, f"claims in the robustness table that no notebook declares any more: {stale}"


def test_the_appendix_shows_the_table():
    page = (ROOT / "appendices" / "checks.md").read_text(encoding="utf-8")
    assert "robustness.md" in page and (ROOT / "appendices" / "robustness.md").exists()


def test_merging_sweeps_replaces_the_chapters_of_the_later_one(tmp_path):
    """`robustness.py --merge OLD NEW`: NEW's chapters replace their runs in OLD; the rest stays, with its date."""
    import argparse

    from tools.book.robustness import merged_runs

    def sweep(name: str, when: str, runs: list[tuple[str, float]]) -> Path:
        path = tmp_path / name
        path.write_text(json.dumps({"stamp": f"Run on {when}: 1 seeds", "seeds": 1, "paths": ["default"],
                                    "runs": [{"chapter": c, "path": "default", "seed": 0, "values": {"x": v}}
                                             for c, v in runs]}))
        return path

    old = sweep("old.json", "day 1", [("05_a", 1.0), ("06_b", 2.0)])
    new = sweep("new.json", "day 2", [("06_b", 3.0)])
    runs, stamps = merged_runs([old, new], argparse.Namespace(seeds=1, paths=["default"]))
    assert sorted((r["chapter"], r["values"]["x"], r["when"]) for r in runs) == [
        ("05_a", 1.0, "Run on day 1"), ("06_b", 3.0, "Run on day 2")]
    assert stamps == "Run on day 1 (chapters 5); Run on day 2 (chapters 6)"
    with pytest.raises(SystemExit, match="was run with 1 seeds"):
        merged_runs([old], argparse.Namespace(seeds=5, paths=["default"]))


def test_the_table_shows_yes_no_and_unasserted_claims(tmp_path):
    """A yes/no claim reads "yes in k of n"; its bound is "yes" (at_least 1) or "no" (at_most 0); a claim without a
    bound is recorded as "not asserted" and cannot fail."""
    import nbformat

    from tools.book.robustness import tabulate

    cell = nbformat.v4.new_code_cell("learned = {}", metadata={"claims": [
        {"name": "always", "value": "1", "at_least": 1, "format": "yes"},
        {"name": "never", "value": "0", "at_most": 0, "format": "yes"},
        {"name": "varies", "value": "0", "format": "yes"}]})
    path = tmp_path / "06_x.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), path)
    runs = [{"chapter": "06_x", "path": "default", "seed": seed,
             "values": {"always": 1.0, "never": 0.0, "varies": float(seed == 1)}} for seed in range(3)]
    rows, table = tabulate(runs, [path], 3, ["default"])
    assert [(row["bound"], row["holds"]) for row in rows] == [("yes", True), ("no", True), ("not asserted", True)]
    assert "| 6 | varies | not asserted | yes in 1 of 3 | 3 | 3 | yes |" in table
    assert "| 6 | never | no | yes in 0 of 3 |" in table


def test_a_claim_counted_in_whole_numbers_is_printed_as_one():
    from tools.book.robustness import fmt

    assert fmt(375.0, "d") == "375" and fmt(0.356, ".2f") == "0.36" and fmt(None, "d") == "–"
