"""One reveal.js deck per session of the instructor guide's course plan, made from the chapters' tagged cells.

The slides are not a second text to keep in step with the book: a deck is the chapter's cells tagged `slide` (the
cell as the book shows it; a `remove-input` cell only its outputs) or `slide-output` (a code cell's outputs only), in
chapter order, under their section titles, with the prose around them as speaker notes. A change in a chapter reaches
its slides at the next `make slides`. Nothing is executed: the stored outputs are what the decks show.

The title slide takes the session's minutes from the guide's course plan and the chapter's learning objectives from
its chapter table; the closing slide lists the chapter's exercises (tools/book/exercises.py) and the one set in class.
build/slides/ holds index.html, session-NN.html and vendor/ (reveal.js and MathJax from npm, tools/course/vendor.py), so
the folder can be zipped and opened from disk on a classroom machine with no network, and pdf/session-NN.pdf, each
deck printed one slide per page by the offline browser, to hand out.

    python -m tools.course.slides [OUT] [--plan six] [--no-pdf]        (default build/slides)
"""

from __future__ import annotations

import argparse
import ast
import base64
import html
import io
import json
import re
import shutil
import textwrap
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import yaml
from markdown_it import MarkdownIt
from mdit_py_plugins.dollarmath import dollarmath_plugin

from tools import ROOT
from tools.book import exercises
from tools.book.myst import myst_to_markdown
from tools.course import slide_figures, slide_redraw, vendor

GUIDE = ROOT / "appendices" / "instructor_guide.md"
WIDTH, HEIGHT = slide_figures.SLIDE  # a slide's size in CSS px (reveal.js scales it to the screen); a PDF page's too
SLIDE_TAGS = ("slide", "slide-output")
FRONT_MATTER = ("", "Learning objectives", "Prerequisites")  # sections of a chapter's opening, not of its content
# Only what a deck loads: reveal.js with one theme and its font, the speaker-notes plugin, and MathJax with SVG
# output (its glyphs are drawn as SVG paths, so it needs no font files); their licences travel with them.
VENDOR_FILES = ("reveal.js/dist/reveal.css", "reveal.js/dist/reveal.js", "reveal.js/dist/theme/white.css",
                "reveal.js/dist/theme/fonts/source-sans-pro", "reveal.js/plugin/notes/notes.js",
                "mathjax/es5/tex-svg.js", "reveal.js/LICENSE", "mathjax/LICENSE")
# Every text at least 19.2 CSS px (0.64 of 30 px), 18.8 px on a 1280 x 720 screen (tests/test_slides.py measures it).
STYLE = """
.reveal { font-size: 30px; }
.reveal h2 { font-size: 1.5em; } .reveal h3 { font-size: 1.1em; color: #555; margin-bottom: 0.2em; }
.reveal h2, .reveal h3 { text-transform: none; }  /* the theme's capitals would turn d_model into DMODEL */
.reveal .slides section p, .reveal .slides section li { text-align: left; }  /* prose reads from the left */
.reveal .slides > section { padding: 0 24px; box-sizing: border-box; }  /* a margin on the right as on the left */
.reveal p.figure-note { font-size: 0.64em; margin: 0.3em 0 0; text-align: center; }  /* a result under its plot */
.reveal section.statement { font-size: 0.85em; }  /* an exercise's statement of over 70 words */
.reveal section.long-statement { font-size: 0.75em; }  /* of over 110: 22.5 px, still above 18 */
.reveal section img { max-height: 600px; max-width: 100%; margin: 0 auto; background: white; }  /* one per slide */
.reveal section img.slide-figure { max-height: none; max-width: none; margin: 0 auto; }  /* drawn at its shown size */
.reveal mjx-container[display="true"] > svg { max-width: 100%; height: auto; }  /* a long equation shrinks to fit */
.reveal pre { font-size: 0.64em; width: 97%; box-shadow: none; }  /* the same margin left and right */
.reveal pre code { max-height: 500px; padding: 0.4em; background: #f6f6f6; white-space: pre-wrap; }  /* a long string */
.reveal pre.output { white-space: pre-wrap; }
.reveal pre.output code { white-space: pre-wrap; overflow-wrap: anywhere; max-height: 260px; }
.reveal pre.output code { background: #fff; border-left: 3px solid #ccc; }
.reveal table { font-size: 0.64em; } .reveal ul { font-size: 0.85em; } .reveal .meta { color: #555; font-size: 0.8em; }
@media print {  /* reveal.js's print layout drops the limits above: a tall figure would leave its page blank */
  .reveal section img { max-height: 600px !important; }
  .reveal section img.slide-figure { max-height: none !important; }
}
"""


@dataclass
class Session:
    number: int
    chapter: Path
    title: str
    minutes: int
    objectives: list[str] = field(default_factory=list)
    in_class: set[str] = field(default_factory=set)
    read_before: list[int] = field(default_factory=list)  # chapters the plan leaves to reading at home before it

    @property
    def title_number(self) -> int:
        """The chapter's number."""
        return int(self.title.split(".")[0])


def _rows(text: str, header: str) -> list[list[str]]:
    """The body rows of the Markdown table whose header line starts with `header`."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
    return rows


# plan -> the guide's heading of its table
PLANS = {"sixteen": "## A course plan", "six": "## A shorter course", "six-decoder": "## A six-session course on"}


def prerequisites(chapter: Path) -> set[int]:
    """The chapters a chapter's opening names as its prerequisites ("chapters 3–5", "chapter 4 (...), chapter 7")."""
    cells = nbformat.read(chapter, as_version=4).cells
    opening = "\n".join(c.source for c in cells[:6] if c.cell_type == "markdown")
    line = re.search(r"\**Prerequisites:?\**:?([^\n]*)", opening)
    found: set[int] = set()
    for first, last in re.findall(r"(\d+)(?:\s*[–-]\s*(\d+))?", line.group(1) if line else ""):
        found.update(range(int(first), int(last or first) + 1))
    return found


def read_plan(guide: Path = GUIDE, plan: str = "sixteen") -> list[Session]:
    """A course plan's sessions (the guide's sixteen-session plan, or another of PLANS), each with its chapter's
    objectives and in-class exercise from the chapter table, and the chapters the plan skips that this one needs
    (read at home before it)."""
    if plan not in PLANS:
        raise SystemExit(f"no course plan {plan!r}: choose one of {sorted(PLANS)}")
    text = guide.read_text(encoding="utf-8")
    if PLANS[plan] not in text:
        raise SystemExit(f"{guide} has no section '{PLANS[plan]}' for the plan {plan!r}")
    section = text.split(PLANS[plan], 1)[1].split("\n## ", 1)[0]
    chapters = {}
    for row in _rows(text, "| chapter | learning objectives"):
        number = int(re.search(r"`(\d+)\.", row[0]).group(1))
        chapters[number] = ([part.strip() for part in row[1].split(";")],
                            set(re.findall(r"`(ch\d+-ex-[\w-]+)` \([^)]*in class", row[3])))
    sessions = []
    for row in _rows(section, "| session | chapter"):
        number = int(row[1].split(".")[0])
        chapter = next((ROOT / "chapters").glob(f"{number:02d}_*.ipynb"))
        objectives, in_class = chapters.get(number, ([], set()))
        skipped = range(sessions[-1].title_number + 1 if sessions else 1, number)
        needed = [n for n in skipped if n in prerequisites(chapter)]
        sessions.append(Session(int(row[0]), chapter, row[1], int(row[-1]), objectives, in_class, needed))
    return sessions


def _math(content: str, info: dict) -> str:
    content = html.escape(content.strip())
    return f"\\[{content}\\]" if info["display_mode"] else f"\\({content}\\)"


def _from_the_start(rule):
    """mdit-py-plugins' inline `$` rule looks for a digit before an opening `$` at src[pos - 1], which at the start
    of a text is its last character: "$-\\infty$ ... in float16" lost its math. At the start, it reads a space."""
    def rule_at_start(state, silent):
        if state.pos != 0:
            return rule(state, silent)
        src, state.src = state.src, state.src + " "  # parsing stops at state.posMax: the space is never parsed
        try:
            return rule(state, silent)
        finally:
            state.src = src
    return rule_at_start


MD = MarkdownIt("commonmark", {"html": True}).enable("table")
dollarmath_plugin(MD, renderer=_math, allow_digits=False)
MD.inline.ruler.at("math_inline", _from_the_start(
    next(r.fn for r in MD.inline.ruler.__rules__ if r.name == "math_inline")))


def prose_words(source: str) -> int:
    """Words of a Markdown cell outside its math (inline and display) and headings: the test's measure of prose."""
    text = re.sub(r"\$\$.*?\$\$|\$[^$\n]+\$", " ", myst_to_markdown(source), flags=re.S)
    return len([w for line in text.splitlines() if not line.startswith("#") for w in line.split()])


MATH = re.compile(r"\$\$.*?\$\$|\$[^$\n]+\$", re.S)


def _text(source: str) -> str:
    """Markdown as plain text for speaker notes: emphasis, code marks and heading marks go, math stays as written
    (its `_`, `*` and `#` are part of the formula)."""
    text, kept, at = myst_to_markdown(source), [], 0
    for match in MATH.finditer(text):
        kept += [re.sub(r"[*`]|^#+\s*", "", text[at:match.start()], flags=re.M), match.group(0)]
        at = match.end()
    kept.append(re.sub(r"[*`]|^#+\s*", "", text[at:], flags=re.M))
    return "".join(kept).strip()


CHECK_CALL = re.compile(r"(^|\.)(assert\w*|check\w*|allclose)$")  # assert_close, check_close, tfm.check.check_true...
CHECKED = "✓"  # how a check prints that it passed: on a code slide, the echo of a call the slide does not show
ECHO = re.compile(r"^✓ .*(matches \(shape .*\)|sums to 1)$")  # tfm.check's own echoes: of a comparison only


def _is_check(node: ast.stmt) -> bool:
    """A self-check, or a block (loop, with, if) of nothing but self-checks."""
    call = node.value if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) else None
    if isinstance(node, ast.Assert) or (call is not None and CHECK_CALL.search(ast.unparse(call.func))):
        return True
    blocks = [getattr(node, "body", None), getattr(node, "orelse", None) or []]
    return isinstance(node, ast.For | ast.With | ast.If) and all(_is_check(n) for b in blocks for n in b)


def _printed(node: ast.stmt) -> str | None:
    """The line(s) a print statement writes, as a regular expression (a formatted field: any text on its line), if
    it is a statement `print(...)` of strings only; else None."""
    call = node.value if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) else None
    if call is None or ast.unparse(call.func) != "print" or call.keywords or not call.args:
        return None
    parts = []
    for arg in call.args:
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            parts.append(re.escape(arg.value))
        elif isinstance(arg, ast.JoinedStr):
            parts.append("".join(re.escape(v.value) if isinstance(v, ast.Constant) else r"[^\n]*?"
                                 for v in arg.values))
        else:
            return None
    return " ".join(parts)


def _statements(body: list[ast.stmt]):
    for node in body:
        yield node
        if not isinstance(node, ast.FunctionDef | ast.ClassDef):  # a definition is shown as written
            for block in ("body", "orelse", "finalbody", "handlers"):
                yield from _statements(getattr(node, block, None) or [])


def _assigned(node: ast.stmt) -> set[str] | None:
    """The names a plain assignment binds (`a = ...`, `a, b = ...`, `a += ...`); None for any other statement."""
    targets = (node.targets if isinstance(node, ast.Assign) else
               [node.target] if isinstance(node, ast.AugAssign | ast.AnnAssign) else None)
    if targets is None:
        return None
    names = set()
    for target in targets:
        elements = target.elts if isinstance(target, ast.Tuple) else [target]
        if not all(isinstance(e, ast.Name) for e in elements):
            return None
        names |= {e.id for e in elements}
    return names


def read_later(sources: list[str]) -> set[str]:
    """The names that cells run after (`sources`, in order) read before binding them again: what they need from
    before. A cell that does not parse needs every word in it."""
    decided: dict[str, bool] = {}  # name -> read (True) or bound again (False) first
    for source in sources:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            decided.update({word: True for word in re.findall(r"\w+", source) if word not in decided})
            continue
        augmented = {id(n.target) for n in ast.walk(tree) if isinstance(n, ast.AugAssign)}
        names = sorted((n for n in ast.walk(tree) if isinstance(n, ast.Name)), key=lambda n: (n.lineno, n.col_offset))
        for name in names:
            decided.setdefault(name.id, isinstance(name.ctx, ast.Load) or id(name) in augmented)
    return {name for name, read in decided.items() if read}


def slide_parts(source: str, later: list[str] = ()) -> tuple[str, list[str]]:
    """A code cell as a slide shows it, and the printed lines it no longer prints (regular expressions).

    Left out: its imports; its self-checks (assert statements and calls of check or assert functions, which the book
    runs and a lecture does not need), and what only served them: a print of fixed text (but for the counter of a
    loop that checks) or of text ending ": ok" in a cell with self-checks, which states what the check asserted; an
    assignment whose names only the removed lines read and no later cell (`later`, their sources in order) reads; a
    block left empty, and the comment lines just above a statement left out. The source as is if it does not parse."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source, []
    statements = list(_statements(tree.body))
    imports = [node for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)]  # not lecture material
    dropped = [node for node in statements if _is_check(node)]
    printed = []
    counters: dict[int, set[str]] = {}  # a statement -> the counters of the loops around it that hold a check
    for loop in (n for n in statements if isinstance(n, ast.For)):
        inside = list(_statements(loop.body))
        if any(node in dropped for node in inside):
            names = {t.id for t in ast.walk(loop.target) if isinstance(t, ast.Name)}
            for inner in inside:
                counters[id(inner)] = counters.get(id(inner), set()) | names
    if dropped:
        for node in statements:
            pattern = _printed(node)
            if pattern is None:
                continue
            fields = [{n.id for n in ast.walk(v) if isinstance(n, ast.Name)} for a in node.value.args
                      if isinstance(a, ast.JoinedStr) for v in a.values if isinstance(v, ast.FormattedValue)]
            # a claim: words (not fields alone), and no field but the counter of a loop that checks; a heading of
            # what the cell prints next ("weights:") stays
            worded = re.search(r"[A-Za-z]{3}", re.sub(r"\[\^\\n\]\*\?", "", pattern))
            counted = worded and all(names and names <= counters.get(id(node), set()) for names in fields)
            if (counted and not pattern.endswith(":")) or pattern.endswith(re.escape(": ok")):
                dropped.append(node)
                printed.append(pattern)
    def lines(nodes):
        return {n for node in nodes for n in range(node.lineno, node.end_lineno + 1)}
    later_names = read_later(list(later))
    changed_by = {}  # a statement that only changes an object (`conv.bias.copy_(...)`) -> the object's name
    for node in statements:
        root = node.value.func if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) else None
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(root, ast.Name) and root is not (node.value.func if isinstance(node, ast.Expr) else None):
            changed_by[node] = root
    while True:
        gone = lines(dropped)
        read_by = {}  # name -> whether a kept line reads it (a change to the object is not a read)
        changes = {id(root) for node, root in changed_by.items()}
        for name in (n for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)):
            if id(name) not in changes:
                read_by[name.id] = read_by.get(name.id, False) or name.lineno not in gone
        dead = {name for node in statements if node not in dropped and (names := _assigned(node))
                and all(n in read_by and not read_by[n] and n not in later_names for n in names) for name in names}
        more = [node for node in statements if node not in dropped and (
            ((names := _assigned(node)) and names <= dead)
            or (node in changed_by and changed_by[node].id in dead)
            or (isinstance(node, ast.For | ast.With | ast.If | ast.While)
                and lines(node.body + getattr(node, "orelse", [])) <= gone))]
        if not more:
            break
        dropped += more
    gone = lines(dropped + imports)
    source_lines = source.splitlines()
    for n in range(len(source_lines), 0, -1):  # a comment on lines of its own goes with the statement below it
        if n not in gone and source_lines[n - 1].lstrip().startswith("#") and n + 1 in gone:
            gone.add(n)
    kept = [line for n, line in enumerate(source_lines, start=1) if n not in gone]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip("\n"), printed


def slide_code(source: str, later: list[str] = ()) -> str:
    """A code cell's source as a slide shows it (slide_parts)."""
    return slide_parts(source, later)[0]


def slide_stream(text: str, unprinted: list[str] | None = None) -> str:
    """A cell's printed text as a slide shows it: without the lines of prints the slide leaves out (`unprinted`, for
    a cell shown with its code) and the echoes of its self-checks ("✓ ..."); a cell shown by its output alone keeps
    the lines of checks that state a result (not tfm.check's echo of a comparison). A claim's ": ok" (the book
    asserted it) goes."""
    for pattern in unprinted or []:
        text = re.sub(f"^{pattern}\n", "", text, flags=re.M)
    echo = CHECKED if unprinted is not None else ECHO
    groups: list[list[str]] = []  # a check's line with the lines tfm.check.say wrapped it onto (two spaces in)
    for line in text.splitlines(keepends=True):
        if groups and groups[-1][0].startswith(CHECKED) and line.startswith("  ") and not line.startswith("   "):
            groups[-1].append(line)
        else:
            groups.append([line])
    kept = [group for group in groups if not (
        group[0].startswith(echo) if isinstance(echo, str)
        else echo.match(" ".join(line.strip() for line in group)))]
    return re.sub(r": ok$", "", "".join(line for group in kept for line in group), flags=re.M)


CODE_WIDTH = 100  # characters of code a slide shows on one line (0.64 em monospace, 1280 px: about 108)


def _depth(events: list[tuple[int, int]], column: int, at_start: int) -> int:
    """The bracket depth at `column` of a line that starts at depth `at_start`, from its (column, depth) changes."""
    found = [depth for col, depth in events if col <= column]
    return found[-1] if found else at_start


def _opened_at(events: list[tuple[int, int]], column: int, at_start: int) -> int | None:
    """The column just inside the innermost bracket open at `column`, if that bracket opened on this line."""
    depth = _depth(events, column, at_start)
    opened = [col for k, (col, d) in enumerate(events) if col <= column and d == depth
              and (events[k - 1][1] if k else at_start) == depth - 1]
    return opened[-1] if depth > 0 and opened else None


STRING_START = re.compile(r"([rRbBuUfF]*)(['\"])")


def _split_string(line: str, start: int, end: int, width: int) -> int | None:
    """Where a one-line string at line[start:end] can be cut in two adjacent strings (after a space, before `width`,
    outside an f-string's fields), or None."""
    found = STRING_START.match(line, start)
    if not found or line[found.end():found.end() + 2] == found.group(2) * 2:  # a triple-quoted string: left alone
        return None
    depth, cut = 0, None
    for i in range(found.end(), min(end - 1, width - 2)):
        if "f" in found.group(1).lower():
            depth += (line[i] == "{") - (line[i] == "}")
        if line[i] == " " and depth == 0 and line[i - 1] != "\\" and i > found.end():
            cut = i + 1  # the space stays with the first part
    return cut


def wrap_code(source: str, width: int = CODE_WIDTH) -> str:
    """Code lines longer than `width` made to fit a slide, still Python: a comment goes on lines of its own above its
    code (wrapped if long); code breaks at a space inside brackets (after a comma if it can), else at a space with a
    backslash, or a long string into two adjacent strings; what follows a break lines up under its bracket (four in
    from the line if the bracket is far right, and so do the bracket's next lines); a one-line docstring goes on
    lines of its own. Lines of `width` or less stay."""
    lines = source.splitlines()
    comments: dict[int, int] = {}  # line number -> column where its comment starts
    strings: dict[int, list[tuple[int, int]]] = {}  # line number -> (start, end) columns of its one-line strings
    depth_at: dict[int, list[tuple[int, int]]] = {}  # line number -> (column, bracket depth from there on)
    depth = 0
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            (row, col), (end_row, end_col) = token.start, token.end
            if token.type == tokenize.COMMENT:
                comments[row] = col
            elif token.type == tokenize.STRING and row == end_row:  # a docstring's lines may break
                strings.setdefault(row, []).append((col, end_col))
            elif token.type == tokenize.OP and token.string in "([{)]}":
                depth += 1 if token.string in "([{" else -1
                depth_at.setdefault(row, []).append((end_col, depth))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return source  # not Python: as it is
    out, depth, moved = [], 0, {}  # moved: a bracket's continuation column -> where its lines go now
    for number, line in enumerate(lines, start=1):
        starts_at = depth  # bracket depth at the line's start
        events = depth_at.get(number, [])
        depth = events[-1][1] if events else depth
        shift = 0  # columns the rest of the line has moved left of where the tokens were read
        column = len(line) - len(line.lstrip())
        if starts_at > 0 and line.strip() and column in moved:  # the next line of a bracket whose line moved
            shift, line = column - moved[column], " " * moved[column] + line.lstrip()
        if starts_at == 0:
            moved = {}
        if len(line) <= width:
            out.append(line)
            continue
        if starts_at > 0 and out and not shift:  # a continuation lined up far right: four in from the line above
            above = out[-1][:len(out[-1]) - len(out[-1].lstrip())]
            if len(above) + 4 < column:
                shift = column - len(above) - 4
                moved[column] = len(above) + 4
                line = above + "    " + line.lstrip()
        indent = line[:len(line) - len(line.lstrip())]
        quote = line.strip()[:3]
        if quote in ('"""', "'''") and line.strip().endswith(quote) and len(strings.get(number, [])) == 1:
            parts = textwrap.wrap(line.strip()[3:-3], width - len(indent) - 3)  # a docstring: on lines of its own
            out += [indent + quote + parts[0]] + [indent + part for part in parts[1:-1]] + (
                [indent + parts[-1] + quote] if len(parts) > 1 else [])
            if len(parts) == 1:
                out[-1] += quote
            continue
        if number in comments:
            comment = line[comments[number] - shift:].lstrip("#").strip()
            out += [indent + "# " + part for part in textwrap.wrap(comment, width - len(indent) - 2)]
            line = line[:comments[number] - shift].rstrip()
            if not line.strip():
                continue
        inside = strings.get(number, [])
        while len(line) > width:
            free = [i for i in range(len(indent) + 8, width - 1) if line[i] == " "
                    and not any(a <= i + shift < b for a, b in inside)]
            nested = [i for i in free if _depth(events, i + shift, starts_at) > 0]
            if free:
                at = ([i for i in nested if line[i - 1] == ","] or nested or free)[-1]
                first, rest = line[:at].rstrip(), line[at + 1:].lstrip()
            else:  # a long string: two adjacent strings, the same string to Python
                held = [(a - shift, b - shift) for a, b in inside if a - shift < width - 2 < b - shift]
                cut = _split_string(line, *held[0], width) if held else None
                if cut is None:
                    break
                a = held[0][0]
                found = STRING_START.match(line, a)
                first, rest = line[:cut] + found.group(2), found.group(0) + line[cut:]
                nested = _depth(events, a + shift, starts_at) > 0
                at = cut - 1
                inside = [(s, e) if s != a + shift else (cut + shift - len(found.group(0)), e)
                          for s, e in inside]
            hang = _opened_at(events, at + shift, starts_at) if nested else None
            hang = hang - shift if hang is not None and hang - shift <= width // 2 else len(indent) + 4
            if nested and _opened_at(events, at + shift, starts_at) is not None:
                moved[_opened_at(events, at + shift, starts_at)] = hang
            out.append(first + ("" if nested else " \\"))
            shift += len(line) - len(rest) - hang
            line = " " * hang + rest
        out.append(line)
    return "\n".join(out)


def _alt(cell) -> str:
    """A figure's alt text: a schematic's own, or its caption, as the website has them."""
    meta = cell.get("metadata", {}).get("mystnb", {})
    text = meta.get("image", {}).get("alt") or meta.get("figure", {}).get("caption") or "figure"
    return html.escape(text, quote=True)


def render_outputs(cell, images: bool = True, unprinted: list[str] | None = None, slide: bool = False) -> str:
    """A code cell's outputs as a browser shows them: images (unless `images` is false: a deck shows them on slides
    of their own), HTML as is, text in <pre>; errors left out. On a `slide`, printed text as a slide shows it
    (slide_stream, `unprinted` from slide_parts)."""
    parts = []
    alt = _alt(cell)
    for out in cell.get("outputs", []):
        if out["output_type"] == "stream":
            text = slide_stream(out["text"], unprinted) if slide else out["text"]
            if text.strip():
                parts.append(f'<pre class="output"><code>{html.escape(text)}</code></pre>')
        elif out["output_type"] in ("display_data", "execute_result"):
            data = out["data"]
            if not images and any(key.startswith("image/") for key in data):
                continue
            if "image/png" in data:
                parts.append(f'<img alt="{alt}" src="data:image/png;base64,{data["image/png"].strip()}">')
            elif "image/svg+xml" in data:
                svg = base64.b64encode(data["image/svg+xml"].encode()).decode()
                parts.append(f'<img alt="{alt}" src="data:image/svg+xml;base64,{svg}">')
            elif "text/html" in data:
                parts.append(f'<div class="output">{data["text/html"]}</div>')
            elif "text/plain" in data:
                parts.append(f'<pre class="output"><code>{html.escape(data["text/plain"])}</code></pre>')
    return "\n".join(parts)


def unannounced(text: str) -> str:
    """Markdown without its closing sentence if that announces what follows ("... a loop over heads:"): for a slide
    that the announced cell does not follow."""
    text = text.rstrip()
    if not text.endswith(":"):
        return text
    sentences = re.split(r"(?<=[.!?])\s+(?=[A-Z*$`(])", text)
    return " ".join(sentences[:-1]) if len(sentences) > 1 else text[:-1] + "."


def render_cell(cell, images: bool = True, later: list[str] = (), followed: bool = True) -> str:
    """One tagged cell as slide content (without its images if `images` is false); `later` is the source of the
    slides' later code cells (slide_parts keeps what they read); a text not `followed` by the cell after it on a
    slide loses a closing sentence that announces that cell."""
    tags = exercises.tags(cell)
    if cell["cell_type"] == "markdown":  # without its headings, and a step's name (the slide's title)
        body = "\n".join(line for line in cell["source"].splitlines() if not line.startswith("#"))
        body = STEP.sub("", body, count=1).strip()
        return MD.render(myst_to_markdown(body if followed else unannounced(body)))
    shown, unprinted = ("", None) if "slide-output" in tags or "remove-input" in tags else slide_parts(
        cell["source"], later)
    code = f'<pre><code class="python">{html.escape(wrap_code(shown))}</code></pre>' if shown else ""
    return code + render_outputs(cell, images, unprinted, slide=True)


def figure_image(figure: slide_figures.SlideFigure, cell) -> str:
    """A redrawn figure at the size it was drawn for (twice as many pixels, for a sharp projection), with its smallest
    text in CSS px for the browser test."""
    return (f'<img class="slide-figure" alt="{_alt(cell)}" src="fig/{figure.file}" width="{figure.width}" '
            f'height="{figure.height}" data-text-px="{figure.text_px}">')


STEP = re.compile(r"\*\*(Step \d+[^*]*?)\.?\*\*")  # "**Step 2: every token's key and value.**"
TITLE_CHARS = 72  # a slide title on one line (1.1 em of 30 px, 1280 px wide)


def visible_length(text: str) -> int:
    """About how many characters a title in Markdown takes on screen: math counts what it shows, not its TeX."""
    shown = MATH.sub(lambda m: re.sub(r"\\[a-zA-Z]+|[{}_^$\\]", "", m.group(0)), text)
    return len(re.sub(r"[*`]", "", shown))


def _outside_math(text: str, pattern: str) -> list[re.Match]:
    math = [m.span() for m in MATH.finditer(text)]
    return [m for m in re.finditer(pattern, text) if not any(a <= m.start() < b for a, b in math)]


def shorten(caption: str, limit: int = TITLE_CHARS) -> str:
    """A caption's first sentence as a slide title: without its asides in parentheses, and cut at its first comma,
    semicolon or colon (after a few words) while longer than `limit` characters on screen."""
    title = re.split(r"(?<=[.:])\s", caption.strip(), maxsplit=1)[0].rstrip(".:")
    if visible_length(title) <= limit:
        return title
    bare = title
    for aside in reversed(_outside_math(title, r"\s*\([^()]*\)")):
        bare = bare[:aside.start()] + bare[aside.end():]
    title = bare if visible_length(bare) >= 20 else title
    for cut in _outside_math(title, r"[,;:]\s"):
        if visible_length(title) <= limit:
            break
        if visible_length(title[:cut.start()]) >= 15:
            title = title[:cut.start()]
    return title


def slide_title(cell, section: str, subsection: str) -> str:
    """What a slide shows, as its title (one line: TITLE_CHARS): a step's own name, else a figure's caption
    (shortened), else the subsection and section it belongs to (the subsection alone if both do not fit); "" in the
    chapter's opening."""
    step = STEP.search(cell.source) if cell.cell_type == "markdown" else None
    caption = cell.get("metadata", {}).get("mystnb", {}).get("figure", {}).get("caption", "")
    if section in FRONT_MATTER:
        return ""
    if step:
        return step.group(1)
    if caption:
        return shorten(caption)
    both = f"{section}: {subsection}"
    return both if subsection and visible_length(both) <= TITLE_CHARS else subsection or section


def fits(body: str) -> bool:
    """Whether a slide's content fits under its title, as estimated from its lines: prose about 75 characters a
    line of 40 px, display math 70 px, code and printed text 24 px a line (0.64 em) and 20 px a block."""
    code = re.findall(r"<pre[^>]*><code[^>]*>(.*?)</code></pre>", body, re.S)
    prose = re.sub(r"<pre.*?</pre>|\\\[.*?\\\]", "", body, flags=re.S)
    text = re.sub(r"<[^>]+>", "", prose)
    height = (sum(-(-len(p) // 75) for p in text.splitlines() if p.strip()) * 40
              + len(re.findall(r"\\\[", body)) * 70 + sum(24 * (c.count("\n") + 1) + 20 for c in code))
    return height <= HEIGHT - 60 - 80  # the title, and the slide's margins


def _figure_note(rest: str) -> str | None:
    """A cell's printed result of one or two short lines (no code), as a note to show under its figure; else None."""
    if "<pre><code" in rest or not rest.strip():
        return None
    text = html.unescape(re.sub(r"<[^>]+>", "", rest)).strip()
    lines = text.splitlines()
    if len(lines) > 2 or max(map(len, lines)) > 110:
        return None
    return f'<p class="figure-note">{"<br>".join(html.escape(line) for line in lines)}</p>'


def _numbered(cards: list[tuple[str, list]]) -> list[tuple[str, list]]:
    """Consecutive slides that share a title numbered "(k/n)", so that the audience can tell them apart."""
    def base(body):
        found = re.match(r"<h3>(.*?)</h3>", body, re.S)
        return re.sub(r" \(\d+/\d+\)$", "", found.group(1)) if found else None
    titles, out, k = [base(body) for body, _ in cards], [], 0
    while k < len(cards):
        end = k
        while end + 1 < len(cards) and titles[end + 1] is not None and titles[end + 1] == titles[k]:
            end += 1
        title = titles[k]
        shown = re.sub(r"<[^>]+>|\\[()]|\\[a-zA-Z]+|[{}_^]", "", title or "")
        if end > k and len(shown) + 6 > TITLE_CHARS + 4 and ": " in title:  # "section: subsection (k/n)"
            title = title.split(": ", 1)[1]
        for j in range(k, end + 1):
            body, prose = cards[j]
            if end > k:
                numbered = f"<h3>{title} ({j - k + 1}/{end - k + 1})</h3>"
                body = re.sub(r"<h3>.*?</h3>", lambda m, shown=numbered: shown, body, count=1, flags=re.S)
            out.append((body, prose))
        k = end + 1
    return out


def slide_cells(cells) -> list[int]:
    return [i for i, cell in enumerate(cells) if set(exercises.tags(cell)) & set(SLIDE_TAGS)]


def build_deck(session: Session, macros: dict, figures: dict | None = None) -> str:
    """The HTML of one session's deck; `figures` ({cell index: [SlideFigure]}, slide_redraw.redraw_chapter) are
    shown instead of the cells' stored images, each on a slide of its own."""
    nb = nbformat.read(session.chapter, as_version=4)
    cells = nb.cells
    title = re.sub(r"^#\s*\d+\.\s*", "", cells[0].source.splitlines()[0]).strip()
    objectives = "".join(f"<li>{MD.renderInline(myst_to_markdown(o))}</li>" for o in session.objectives)
    math = ' class="has-math"' if "\\(" in objectives else ""
    slides = [f'<section{math}><h2>Session {session.number}: {html.escape(title)}</h2>'
              f'<p class="meta">chapter {session.title} · {session.minutes} minutes planned</p>'
              + "".join(f'<p class="meta">Read at home before this session: chapter {n}; one of its '
                        "pencil-and-paper exercises is the entry quiz.</p>" for n in session.read_before) +
              f'<ul>{objectives}</ul></section>']
    # Speaker notes: the section's untagged prose, each paragraph on the slide it leads up to; the prose after a
    # section's last slide goes to that slide. Exercises, summary and references stay in the book.
    found = exercises.find_exercises(cells)
    stop = found[0].start if found else len(cells)
    section, notes, last, cards, text_slide = "", [], None, [], None
    tagged = set(slide_cells(cells))
    subsection = ""
    for i, cell in enumerate(cells[:stop]):
        heading = next((line[3:] for line in cell.source.splitlines() if line.startswith("## ")), None)
        if cell.cell_type == "markdown" and heading is not None:
            if last is not None:
                last[1].extend(notes)
            section, notes, last, subsection, text_slide = heading.strip(), [], None, "", None
        sub = [line[4:].strip() for line in cell.source.splitlines() if line.startswith("### ")]
        if cell.cell_type == "markdown" and sub:
            subsection, text_slide = sub[-1], None  # code under a new heading is not the last slide's
        if i in tagged:
            shown = slide_title(cell, section, subsection) or title  # a figure of the opening: the chapter's title
            heading = f"<h3>{MD.renderInline(myst_to_markdown(shown))}</h3>"
            # the code and printed output (if any), then each figure on a slide of its own: redrawn, or as stored
            redrawn = (figures or {}).get(i)
            shown_images = ([figure_image(figure, cell) for figure in redrawn] if redrawn else
                            re.findall(r"<img [^>]*>", render_outputs(cell)) if cell.cell_type == "code" else [])
            # what a later slide's code reads stays on this one (the book's other cells are not shown)
            later = [cells[k].source for k in sorted(tagged) if k > i and cells[k].cell_type == "code"]
            rest = render_cell(cell, images=False, later=later, followed=i + 1 in tagged)
            volatile = "nbval-ignore-output" in exercises.tags(cell)
            if redrawn and volatile and "<pre><code" not in rest:  # measured again for the slide: the stored
                rest = ""  # numbers would contradict the figure
            elif shown_images and "slide-output" in exercises.tags(cell) and rest.strip() and not _figure_note(rest):
                notes.append("Printed in the book: " + html.unescape(re.sub(r"<[^>]+>", "", rest)).strip())
                rest = ""  # a figure's claims, checked in the book, for the speaker
            if not rest.strip() and not shown_images:  # nothing left once the self-checks are out
                continue
            if cell.cell_type == "code" and text_slide is not None and not shown_images and fits(
                    cards[text_slide][0] + rest):  # a step's code under the step: one slide
                body, prose = cards[text_slide]
                cards[text_slide] = last = (body + rest, prose + notes)
                notes, text_slide = [], None
                continue
            note = _figure_note(rest) if redrawn else None  # a line or two of result, under the figure
            panels = [f" ({k}/{len(shown_images)})" if len(shown_images) > 1 else ""
                      for k in range(1, len(shown_images) + 1)]
            bodies = ([heading + rest] if (rest.strip() and note is None) or not shown_images else []) + [
                heading.replace("</h3>", f"{panel}</h3>") + image + (note if k == 0 and note else "")
                for k, (image, panel) in enumerate(zip(shown_images, panels, strict=True))]
            new = [(body, notes if k == 0 else []) for k, body in enumerate(bodies)]
            text_slide = len(cards) if cell.cell_type == "markdown" else None
            cards += new
            last, notes = new[-1], []
        elif cell.cell_type == "markdown":
            notes.append(_text(cell.source))
    if last is not None:
        last[1].extend(notes)
    cards = _numbered(cards)
    for body, prose in cards:
        aside = f'<aside class="notes">{html.escape(" ".join(prose))}</aside>' if prose else ""
        math = ' class="has-math"' if "\\(" in body or "\\[" in body else ""
        slides.append(f"<section{math}>{body}{aside}</section>")
    items = []
    for ex in found:
        where = " <strong>(in class)</strong>" if ex.label in session.in_class else ""
        items.append(f"<li>{ex.grade} {MD.renderInline(myst_to_markdown(ex.title))}{where}</li>")
    slides.append(f"<section><h2>Exercises</h2><ul>{''.join(items)}</ul></section>")
    for ex in found:  # the in-class exercise's statement, on a slide of its own, to work on in pairs
        if ex.label in session.in_class:
            statement = "\n\n".join(myst_to_markdown(cells[k].source) for k in range(ex.start + 1, ex.end)
                                    if cells[k].cell_type == "markdown")
            body = MD.render(statement)
            words = prose_words(statement)
            kind = ["has-math"] * ("\\(" in body or "\\[" in body) + (
                ["long-statement"] if words > 110 else ["statement"] if words > 70 else [])
            math = f' class="{" ".join(kind)}"' if kind else ""
            slides.append(f"<section{math}><h3>In class, in pairs: {ex.grade} "
                          f"{MD.renderInline(myst_to_markdown(ex.title))}</h3>{body}</section>")
    # Without `noundefined`, a macro missing from _config.yml is an error (data-mjx-error) rather than red text.
    config = {"tex": {"macros": macros, "packages": {"[-]": ["noundefined"]},
                      "inlineMath": [["\\(", "\\)"]], "displayMath": [["\\[", "\\]"]]},
              "svg": {"fontCache": "global"}}
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>Session {session.number}: {html.escape(title)}</title>
<link rel="stylesheet" href="vendor/reveal.js/dist/reveal.css">
<link rel="stylesheet" href="vendor/reveal.js/dist/theme/white.css">
<style>{STYLE}</style>
<script>window.MathJax = {json.dumps(config)};</script>
<script src="vendor/mathjax/es5/tex-svg.js"></script>
</head><body><div class="reveal"><div class="slides">
{chr(10).join(slides)}
</div></div>
<script src="vendor/reveal.js/dist/reveal.js"></script>
<script src="vendor/reveal.js/plugin/notes/notes.js"></script>
<script>
Reveal.initialize({{hash: true, width: {WIDTH}, height: {HEIGHT}, margin: {slide_figures.MARGIN}, center: false,
                   pdfMaxPagesPerSlide: 1, pdfSeparateFragments: false, plugins: [RevealNotes]}});
MathJax.startup.promise.then(() => Reveal.layout());
</script>
</body></html>
"""


def book_macros() -> dict:
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    return config["sphinx"]["config"]["mathjax3_config"]["tex"]["macros"]


def print_decks(decks: list[Path]) -> list[Path]:
    """Print each deck (all in one folder, as `build` writes them) to a PDF beside it, `pdf/session-NN.pdf`: one page
    per slide, as reveal.js lays a deck out for printing (`?print-pdf`), with the math typeset and every image
    loaded, in the offline browser. Returns the PDFs."""
    from tools.course.browser import READY_JS, offline_page, serve

    folder = decks[0].parent
    (folder / "pdf").mkdir(exist_ok=True)
    printed = []
    with serve(folder) as server, offline_page(server, viewport={"width": WIDTH, "height": HEIGHT}) as offline:
        for deck in decks:
            offline.page.goto(f"{server}/{deck.name}?print-pdf", wait_until="load")
            offline.page.evaluate(READY_JS)
            offline.page.wait_for_function("() => document.querySelectorAll('.pdf-page').length > 0")
            offline.page.evaluate(READY_JS)  # images of the print layout
            pdf = folder / "pdf" / deck.with_suffix(".pdf").name
            offline.page.pdf(path=str(pdf), width=f"{WIDTH}px", height=f"{HEIGHT}px", print_background=True)
            printed.append(pdf)
    return printed


def build(out: Path, node_modules: Path | None = None, plan: str = "sixteen", redraw: bool = True,
          sessions: set[int] | None = None) -> list[Path]:
    """Write index.html, one deck per session of `plan` (numbered as that plan numbers them; only `sessions` if
    given) and vendor/ into `out`; return the decks. With `redraw`, the figures are drawn again at slide size
    (slide_figures: the chapters' figure cells are run) into out/fig; without, the decks show the stored ones."""
    out = Path(out).resolve()  # once: the figure cells run in a kernel whose working directory is chapters/
    node_modules = node_modules or vendor.ensure()
    if out.exists():
        shutil.rmtree(out)
    for name in VENDOR_FILES:
        src, dst = node_modules / name, out / "vendor" / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if src.is_dir() else shutil.copy)(src, dst)
    macros, decks, links, drawn = book_macros(), [], [], {}
    for session in read_plan(plan=plan):
        if sessions is not None and session.number not in sessions:
            continue
        if redraw and session.chapter not in drawn:
            drawn[session.chapter] = slide_redraw.redraw_chapter(session.chapter, out / "fig")
            report(session.chapter, drawn[session.chapter])
        deck = out / f"session-{session.number:02d}.html"
        deck.write_text(build_deck(session, macros, drawn.get(session.chapter)), encoding="utf-8")
        decks.append(deck)
        links.append(f'<li><a href="{deck.name}">Session {session.number}: chapter {html.escape(session.title)}</a> '
                     f"({session.minutes} min)</li>")
    (out / "index.html").write_text(
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Slides</title></head><body>'
        f"<h1>Slides, one deck per session</h1><ul>{''.join(links)}</ul>"
        "<p>Press S in a deck for the speaker view (notes), F for full screen, Esc for an overview.</p>"
        "</body></html>\n", encoding="utf-8")
    return decks


def report(chapter: Path, figures: dict) -> None:
    """Print what a figure could not be made readable for (its text is small, overlaps, or leaves the figure)."""
    for index, found in figures.items():
        for figure in found:
            small = figure.text_px * (1 - slide_figures.MARGIN) < slide_figures.MIN_TEXT_PX
            found_small = [f"text of {figure.text_px:.1f} CSS px ({figure.smallest!r})"] if small else []
            problems = found_small + figure.problems
            more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
            if problems:
                shown = "; ".join(problems[:3]).replace("\n", " ")
                print(f"{chapter.name[:2]} cell {index} ({figure.file}): {shown}{more}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="One reveal.js deck per session of a course plan.")
    parser.add_argument("out", type=Path, nargs="?", default=ROOT / "build" / "slides")
    parser.add_argument("--plan", default="sixteen", choices=sorted(PLANS), help="the instructor guide's plan")
    parser.add_argument("--no-pdf", action="store_true", help="leave out the PDF of each deck")
    parser.add_argument("--stored-figures", action="store_true",
                        help="show the notebooks' stored figures instead of drawing them again at slide size (fast)")
    parser.add_argument("--session", type=int, action="append", default=None,
                        help="only this session's deck (repeatable; default: every session of the plan)")
    args = parser.parse_args()
    decks = build(args.out, plan=args.plan, redraw=not args.stored_figures,
                  sessions=set(args.session) if args.session else None)
    for path in decks + ([] if args.no_pdf else print_decks(decks)):
        print(path)
