"""One gradebook for a whole course, from the score tables that `make grade` writes, in the CSV layouts that Canvas
and Moodle import.

Usage: python -m tools.course.gradebook [--course build/course] [--roster roster.csv]   (`make gradebook`)

`make grade CHAPTER=NN` writes `<course>/scores/chNN.csv` (one row per learner, one column per exercise, the total).
This reads every such table and writes, in `<course>/gradebook/`:

- `gradebook.csv`: one row per learner, one column per chapter graded (its total) and the course total, each header
  saying its maximum (`ch03 (14)`); a learner missing from a chapter's table was not graded there, and the cell is
  blank (not 0: an import leaves a blank grade as it was), the total adding what was graded. Beside a chapter, its
  written answers (`ch01 written (2)`), from `<course>/scores/chNN-written.csv`: the sheet `make grade` writes with
  one blank cell per learner and written answer, for the points the instructor gives by hand (from the rubric, after
  reading `chNN-written.md`, every learner's answers question by question); a learner with none entered is blank;
- `canvas.csv`: for Canvas's Gradebook import (Grades > Import). Canvas matches a row to a learner by one of its
  first columns (`Student`, the name as "Last, First"; `ID`, Canvas's user id; `SIS User ID`) and expects `SIS Login
  ID` and `Section` beside them; every later column is an assignment, which the import creates when its name is new
  (`ch03: Multi-head attention`), and a second row `Points Possible` gives each assignment's maximum;
- `moodle.csv`: for Moodle's "Import grades: CSV file". Moodle asks at import which column identifies the user
  (here `email`, `username` or `idnumber`) and which grade item each other column fills; one column per chapter.

The roster (optional) is a CSV with a column `learner` (the name `make grade` used: the submission's file or folder
name) and any of `name` ("Last, First"), `canvas_id`, `sis_user_id`, `sis_login_id`, `section`, `email`, `username`,
`idnumber`. Without it only gradebook.csv is written: the Canvas and Moodle files need the roster's identifiers,
since the submissions' file names match no account.
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
from pathlib import Path

from tools.book.notebooks import CHAPTERS
from tools.course.assignments import DEFAULT_COURSE

TOTAL = re.compile(r"^total \((?P<points>[\d.]+)\)$")
CANVAS_FIRST = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
MOODLE_FIRST = ["email", "username", "idnumber", "name"]


def chapter_title(assignment: str) -> str:
    """ch03 -> "ch03: Multi-head attention" (the title of chapter 3's notebook, from its first heading)."""
    matches = sorted(CHAPTERS.glob(f"{assignment[2:]}_*.ipynb"))
    if not matches:
        return assignment
    import nbformat

    heading = next((line for cell in nbformat.read(matches[0], as_version=4).cells if cell.cell_type == "markdown"
                    for line in cell.source.splitlines() if line.startswith("# ")), "")
    title = re.sub(r"^#\s*(\d+\.\s*)?", "", heading).strip()
    return f"{assignment}: {title}" if title else assignment


def read_scores(scores: Path) -> dict[str, tuple[float, dict[str, float]]]:
    """chNN -> (its maximum, learner -> total), from every `<scores>/chNN.csv`, in chapter order."""
    tables = {}
    for path in sorted(scores.glob("ch[0-9][0-9].csv")):
        rows = list(csv.DictReader(path.open(encoding="utf-8", newline="")))
        header = rows[0].keys() if rows else next(csv.reader(path.open(encoding="utf-8", newline="")), [])
        total = next((TOTAL.match(h) for h in header if TOTAL.match(h)), None)
        if total is None:
            raise SystemExit(f"{path}: no 'total (N)' column; was it written by `make grade`?")
        tables[path.stem] = (float(total.group("points")),
                             {row["learner"]: float(row[total.group(0)] or 0) for row in rows})
    if not tables:
        raise SystemExit(f"no score tables in {scores}: run `make grade CHAPTER=NN SUBMISSIONS=...` first")
    return tables


WRITTEN_COLUMN = re.compile(r"^(?P<id>ch\d+-[\w-]+-written-\d+) \((?P<points>[\d.]+)\)$")


def write_written_sheet(path: Path, learners: list[str], written: dict[str, int]) -> None:
    """The sheet of a chapter's manually graded answers (`<course>/scores/chNN-written.csv`): one row per learner, one
    column per written answer (`<grade_id> (points)`), blank until the instructor enters the points. Grading again
    keeps every grade entered and adds rows for new learners."""
    header = ["learner", *[f"{grade_id} ({p})" for grade_id, p in written.items()]]
    kept: dict[str, dict[str, str]] = {}
    if path.exists():
        kept = {row["learner"]: row for row in csv.DictReader(path.open(encoding="utf-8", newline=""))}
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        for learner in sorted(set(learners) | set(kept)):
            writer.writerow([learner, *[(kept.get(learner, {}).get(column) or "").strip() for column in header[1:]]])


def read_written(scores: Path) -> dict[str, tuple[float, dict[str, float]]]:
    """"chNN written" -> (its maximum, learner -> points entered), from every `<scores>/chNN-written.csv`; a learner
    with no points entered is left out (not graded yet: blank, not 0). Points outside 0..the answer's maximum, or
    that are not numbers, are an error naming the cell."""
    tables = {}
    for path in sorted(scores.glob("ch[0-9][0-9]-written.csv")):
        rows = list(csv.DictReader(path.open(encoding="utf-8", newline="")))
        columns = {h: float(m.group("points")) for h in (rows[0].keys() if rows else [])
                   if (m := WRITTEN_COLUMN.match(h))}
        totals = {}
        for row in rows:
            entered = {h: (row[h] or "").strip() for h in columns if (row[h] or "").strip()}
            for h, value in entered.items():
                try:
                    number = float(value)
                except ValueError:
                    number = -1.0
                if not 0 <= number <= columns[h]:
                    raise SystemExit(f"{path}: {row['learner']}, {h}: {value!r} is not a number of points from 0 "
                                     f"to {columns[h]:g}")
            if entered:
                totals[row["learner"]] = sum(float(v) for v in entered.values())
        if columns:
            tables[f"{path.stem.split('-')[0]} written"] = (sum(columns.values()), totals)
    return tables


def read_roster(roster: Path | None, learners: list[str]) -> dict[str, dict[str, str]]:
    """learner -> their identifying fields; the learner's own name wherever the roster gives none."""
    given: dict[str, dict[str, str]] = {}
    if roster is not None:
        for row in csv.DictReader(roster.open(encoding="utf-8", newline="")):
            if "learner" not in row:
                raise SystemExit(f"{roster}: the roster needs a column 'learner' (the names `make grade` used)")
            given[row["learner"]] = {k: (v or "").strip() for k, v in row.items()}
        unknown = sorted(set(given) - set(learners))
        missing = sorted(set(learners) - set(given))
        if missing:
            raise SystemExit(f"{roster}: no row for {missing[:5]} (graded learners must all be in the roster)")
        if unknown:
            print(f"roster learners with no score (blank everywhere): {unknown[:5]}", file=sys.stderr)
    return {learner: given.get(learner, {}) for learner in sorted(set(learners) | set(given))}


def _fmt(points: float) -> str:
    return f"{points:g}"


def write_gradebook(course: Path, roster: Path | None = None) -> dict[str, Path]:
    """Write gradebook.csv, canvas.csv and moodle.csv into `<course>/gradebook/`; return their paths."""
    tables = read_scores(course / "scores")
    tables.update(read_written(course / "scores"))
    tables = dict(sorted(tables.items()))  # each chapter's written answers beside its autograded exercises
    people = read_roster(roster, [learner for _, scores in tables.values() for learner in scores])
    out = course / "gradebook"
    out.mkdir(parents=True, exist_ok=True)
    titles = {name: (chapter_title(name.split()[0]) + ", written answers" if name.endswith(" written")
                     else chapter_title(name)) for name in tables}
    maximum = sum(points for points, _ in tables.values())

    def totals(learner: str) -> list[float | None]:  # None: not in that chapter's table, not graded there
        return [scores.get(learner) for _, scores in tables.values()]

    def cells(learner: str) -> list[str]:  # blank where not graded: an import then leaves the grade as it was
        return ["" if points is None else _fmt(points) for points in totals(learner)]

    def total(learner: str) -> str:
        return _fmt(sum(points for points in totals(learner) if points is not None))

    kinds = ("gradebook", "canvas", "moodle") if roster is not None else ("gradebook",)
    paths = {kind: out / f"{kind}.csv" for kind in kinds}
    for stale in {"canvas", "moodle"} - set(kinds):
        (out / f"{stale}.csv").unlink(missing_ok=True)
    with paths["gradebook"].open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["learner", *[f"{n} ({_fmt(p)})" for n, (p, _) in tables.items()], f"total ({_fmt(maximum)})"])
        for learner in people:
            writer.writerow([learner, *cells(learner), total(learner)])
    if roster is None:
        print("canvas.csv and moodle.csv not written: without a roster (--roster) their identity columns would hold "
              "the submissions' file names, which match no Canvas or Moodle account", file=sys.stderr)
        return paths
    with paths["canvas"].open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow([*CANVAS_FIRST, *titles.values()])
        writer.writerow(["Points Possible", "", "", "", "", *[_fmt(p) for p, _ in tables.values()]])
        for learner, who in people.items():
            writer.writerow([who.get("name") or learner, who.get("canvas_id", ""), who.get("sis_user_id") or learner,
                             who.get("sis_login_id") or learner, who.get("section", ""), *cells(learner)])
    with paths["moodle"].open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow([*MOODLE_FIRST, *titles.values()])
        for learner, who in people.items():
            writer.writerow([who.get("email", ""), who.get("username") or learner, who.get("idnumber", ""),
                             who.get("name") or learner, *cells(learner)])
    return paths


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--course", type=Path, default=DEFAULT_COURSE)
    parser.add_argument("--roster", type=Path, default=None, help="CSV with a 'learner' column and identifiers")
    args = parser.parse_args()
    for kind, path in write_gradebook(args.course, args.roster).items():
        print(f"{kind}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
