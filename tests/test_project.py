"""Project-level checks: the repository URL has one source of truth, and every notebook keeps the book's anatomy."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "chapters").glob("*.ipynb"))


def repository_url() -> str:
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    return config["repository"]["url"].rstrip("/")


def cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def source(cell: dict) -> str:
    return "".join(cell["source"])


def test_there_are_chapters():
    assert NOTEBOOKS, "no notebooks found in chapters/"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_setup_cell_installs_from_the_configured_repository(path):
    code = [c for c in cells(path) if c["cell_type"] == "code"]
    setup = source(code[0])
    assert 'if "google.colab" in sys.modules:' in setup, f"{path.name}: the first code cell is not the setup cell"
    urls = re.findall(r"git\+(https://[^\s\"'@]+)", setup)
    assert urls == [repository_url()], f"{path.name}: installs from {urls}, _config.yml says {repository_url()}"
    assert "tfm.seed_everything(" in setup and "tfm.get_device()" in setup
    assert not re.search(r"\b(torch|numpy)==", setup), f"{path.name}: the setup cell must not pin torch or numpy"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_chapter_anatomy(path):
    text = "\n".join(source(c) for c in cells(path) if c["cell_type"] == "markdown")
    for heading in ("Learning objectives", "Exercises", "Summary", "References"):
        assert re.search(rf"^#+ .*{heading}", text, re.M | re.I), f"{path.name}: no '{heading}' section"
    assert len(re.findall(r"```\{exercise-start\}", text)) >= 3, f"{path.name}: fewer than three exercises"
    assert len(re.findall(r"```\{solution-start\}", text)) >= 3, f"{path.name}: fewer than three hidden solutions"
    assert "{footbibliography}" in text, f"{path.name}: no footbibliography block"
    assert not re.search(r"\{cite(:\w+)?\}|\{bibliography\}", text), (
        f"{path.name}: use {{footcite}} and {{footbibliography}} (page-local), not {{cite}}/{{bibliography}}"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_chapter_is_in_the_table_of_contents(path):
    toc = (ROOT / "_toc.yml").read_text(encoding="utf-8")
    assert f"chapters/{path.stem}" in toc, f"{path.name} is not listed in _toc.yml"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_stored_outputs_are_clean(path):
    for i, cell in enumerate(cells(path)):
        if cell["cell_type"] != "code" or not source(cell).strip():
            continue
        assert cell.get("execution_count") is not None, f"{path.name}: code cell {i} was never executed"
        for out in cell.get("outputs", []):
            assert out["output_type"] != "error" or "raises-exception" in cell["metadata"].get("tags", []), (
                f"{path.name}: code cell {i} stored an error"
            )
            text = json.dumps(out.get("text", "")) + json.dumps(out.get("data", {}).get("text/plain", ""))
            assert not re.search(r" at 0x[0-9a-f]{6,}", text), f"{path.name}: cell {i} prints a memory address"
            assert not re.search(r"/(root|home|tmp|work|Users)/\S+", text), f"{path.name}: cell {i} prints a path"


def test_pyproject_keeps_lower_bounds_only():
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    deps = re.search(r"^dependencies = \[(.*?)\]", text, re.M | re.S).group(1)
    assert "==" not in deps and "<" not in deps, f"tfm's dependencies must be lower bounds only: {deps}"


def test_requirements_pin_the_cpu_torch():
    lines = (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines()
    assert "torch==2.13.0" in lines


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_figures_are_stored(path):
    # A kernel started with MPLBACKEND=Agg stores no figure at all; nbval would not notice (it skips image/png).
    for i, cell in enumerate(cells(path)):
        if cell["cell_type"] == "code" and "plt.show()" in source(cell):
            kinds = [kind for out in cell.get("outputs", []) for kind in out.get("data", {})]
            assert "image/png" in kinds, f"{path.name}: code cell {i} shows a figure but stores no image/png"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_math_uses_no_website_only_macros(path):
    # The MathJax macros of _config.yml exist on the website only; Colab and Jupyter would show them as errors.
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    macros = config["sphinx"]["config"]["mathjax3_config"]["tex"]["macros"]
    text = "\n".join(source(c) for c in cells(path) if c["cell_type"] == "markdown")
    used = sorted({m for m in macros if re.search(rf"\\{m}(?![a-zA-Z])", text)})
    assert not used, f"{path.name} uses website-only macros {used}: write plain LaTeX (e.g. d_k, W_Q, \\top)"


@pytest.mark.parametrize("heading, sessions", [("## A course plan", None), ("## A shorter course", 6),
                                               ("## A six-session course on", 6)])
def test_course_plan_sessions_fit_ninety_minutes_with_slack(heading, sessions):
    guide = (ROOT / "appendices" / "instructor_guide.md").read_text(encoding="utf-8")
    plan = guide.split(heading, 1)[1].split("\n## ", 1)[0]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in plan.splitlines()
            if re.match(r"\| \d+ \|", line)]
    assert len(rows) >= 6, "the course plan table has too few sessions"
    assert [int(row[0]) for row in rows] == list(range(1, len(rows) + 1)), "sessions are numbered 1, 2, 3..."
    for session, chapter, *minutes in rows:
        reading, exercises, quiz, planned = (int(m) for m in minutes)
        assert reading + exercises + quiz == planned, f"session {session} ({chapter}) does not add up"
        assert planned <= 75, f"session {session} ({chapter}) plans {planned} of 90 minutes: leave 15 for slack"
    chapters = {re.match(r"(\d+)\.", chapter).group(1) for _, chapter, *_ in rows}
    every = {str(int(p.name[:2])) for p in sorted((ROOT / "chapters").glob("*.ipynb"))}
    if sessions is None:  # the long plan: one session per chapter
        assert chapters == every, chapters
    else:
        assert len(rows) == sessions and chapters <= every, chapters


def test_glossary_has_sixty_terms_and_every_chapter_links_to_it():
    glossary = (ROOT / "appendices" / "glossary.md").read_text(encoding="utf-8")
    body = glossary.split("```{glossary}", 1)[1].split("\n```", 1)[0]
    terms = [line.strip() for line in body.splitlines() if line and not line.startswith((" ", "\t"))]
    assert len(terms) >= 60, f"the glossary has {len(terms)} terms"
    for path in sorted((ROOT / "chapters").glob("*.ipynb")):
        markdown = "".join("".join(c["source"]) for c in json.loads(path.read_text(encoding="utf-8"))["cells"]
                           if c["cell_type"] == "markdown")
        assert len(re.findall(r"\{term\}`", markdown)) >= 3, f"{path.name} links fewer than three glossary terms"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_schematic_cells_carry_caption_label_and_alt_text(path):
    """myst-nb reads a figure's caption and label from the cell's mystnb.figure, its alt text from mystnb.image."""
    for i, cell in enumerate(cells(path)):
        if cell["cell_type"] == "code" and "tfm.viz.schematic(" in source(cell):
            meta = cell["metadata"].get("mystnb", {})
            assert meta.get("figure", {}).get("caption") and meta["figure"].get("name", "").startswith("fig-"), (
                f"{path.name}: schematic cell {i} has no mystnb.figure caption and fig- name")
            assert len(meta.get("image", {}).get("alt", "").split()) >= 10, f"{path.name}: cell {i}: no alt"
            assert "remove-input" in cell["metadata"].get("tags", []), f"{path.name}: cell {i}: code shown"


def test_the_two_guides_agree_on_the_in_class_exercises():
    # The instructor guide's chapter table marks one exercise per chapter "in class"; the exercise guide, which plans
    # each exercise, must say that exercise is done in class too (the two had disagreed on chapter 3).
    guide = (ROOT / "appendices" / "instructor_guide.md").read_text(encoding="utf-8")
    exercises = (ROOT / "appendices" / "exercise_guide.md").read_text(encoding="utf-8")
    in_class = re.findall(r"`(ch\d+-(?:ex|pp)-[\w-]+)` \([^)]*in class", guide)
    assert len(in_class) >= 5, in_class
    where = {m.group(1): m.group(2) for m in re.finditer(r"^\| `(ch\d+-[\w-]+)` \|[^|]*\|[^|]*\| ([^|]*) \|", exercises,
                                                          re.M)}
    wrong = {label: where.get(label) for label in in_class if "in class" not in (where.get(label) or "")}
    assert not wrong, f"in class in the instructor guide, not in the exercise guide: {wrong}"
    # Every session of the long plan gives minutes to exercises in class: each chapter marks at least one code
    # exercise for them (its deck ends on that statement), and the exercise guide's minutes for those fit the plan's.
    minutes = {m.group(1): int(m.group(2)) for m in re.finditer(
        r"^\| `(ch\d+-[\w-]+)` \|.*\| (\d+) min \|$", exercises, re.M)}
    plan = guide.split("## A course plan", 1)[1].split("\n## ", 1)[0]
    for row in re.findall(r"^\| \d+ \| (\d+)\. [^|]* \| \d+ \| (\d+) \|", plan, re.M):
        chapter, planned = int(row[0]), int(row[1])
        marked = [label for label in in_class if label.startswith(f"ch{chapter:02d}-ex-")]
        assert marked, f"chapter {chapter}: {planned} minutes of exercises in class, none marked in class"
        needed = sum(minutes[label] for label in marked)
        assert needed <= planned, f"chapter {chapter}: {marked} take {needed} min, the plan gives {planned}"


def test_every_chapter_after_the_short_course_has_a_project_brief():
    guide = (ROOT / "appendices" / "instructor_guide.md").read_text(encoding="utf-8")
    briefs = guide.split("## Projects for chapters 8 onwards", 1)[1].split("\n## ", 1)[0]
    briefed = {int(n) for n in re.findall(r"^\| (\d+)\. ", briefs, flags=re.MULTILINE)}
    every = {int(p.name[:2]) for p in NOTEBOOKS}
    assert briefed == {n for n in every if n >= 8}, f"project briefs for chapters {sorted(briefed)}, not 8 onwards"


def test_course_kit_names_one_deck_per_session_of_the_plan():
    guide = (ROOT / "appendices" / "instructor_guide.md").read_text(encoding="utf-8")
    plan = guide.split("## A course plan", 1)[1].split("\n## ", 1)[0]
    sessions = len(re.findall(r"^\| \d+ \|", plan, flags=re.MULTILINE))
    kit = (ROOT / "appendices" / "course_kit.md").read_text(encoding="utf-8")
    decks = re.search(r"`session-01\.html` to `session-(\d+)\.html`", kit)
    assert decks and int(decks.group(1)) == sessions, f"the course kit should name decks 01 to {sessions:02d}"
