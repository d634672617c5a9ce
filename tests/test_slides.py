"""The slides (tools/course/slides.py): every chapter carries its session in a few short tagged cells, one deck is
written per session of the instructor guide's plan, nothing in a deck wants the network, and in headless Chromium
(file://, network cut off) every slide of two decks shows typeset math and loaded figures, and every text of
session 1, figures included, is at least 18 px at 1280 x 720.

The browser part is skipped when chromium, npm or playwright is missing, unless TFM_REQUIRE_BROWSER=1 (CI).
"""

from __future__ import annotations

import html
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from tools.book.exercises import find_exercises, tags
from tools.course import slides

ROOT = Path(__file__).resolve().parents[1]

CHAPTERS = sorted((ROOT / "chapters").glob("[0-9][0-9]_*.ipynb"))
MAX_WORDS, MAX_LINES = 70, 15  # a slide is a figure, an equation or a few lines of code, not a page of prose
DISPLAY_MATH = re.compile(r"\$\$.+?\$\$", re.S)
# A script, stylesheet, font or image from another host: src=/href= or CSS url() or @import with http(s): or //.
REMOTE = re.compile(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//|url\(\s*["']?\s*(?:https?:)?//"""
                    r"""|@import\s+["']https?:""")


def _before_exercises(path: Path) -> list:
    cells = nbformat.read(path, as_version=4).cells
    found = find_exercises(cells)
    return cells[:found[0].start] if found else cells


def _shows_figure(cell) -> bool:
    return cell.cell_type == "code" and any(
        key.startswith("image/") for out in cell.get("outputs", []) for key in out.get("data", {}))


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem[:2])
def test_chapter_slides_carry_the_session(path):
    cells = _before_exercises(path)
    tagged = [cells[i] for i in slides.slide_cells(cells)]
    # a code cell after a tagged text (a step and its code) counts with it: a deck shows them on one slide if they fit
    shown = [c for k, c in enumerate(tagged)
             if not (c.cell_type == "code" and not _shows_figure(c) and k and tagged[k - 1].cell_type == "markdown")]
    assert 6 <= len(shown) <= 14, f"{path.name}: {len(shown)} slides of cells, want 6 to 14"
    assert any(_shows_figure(c) for c in tagged), f"{path.name}: no slide shows a figure"
    untagged_schematics = [i for i, c in enumerate(cells) if c.cell_type == "code"
                           and "tfm.viz.schematic(" in c.source and c not in tagged]
    assert not untagged_schematics, f"{path.name}: schematic figure cells {untagged_schematics} are not slides"
    # A chapter with a short cell of display math puts one on a slide (long paragraphs with math stay in the book).
    short_equations = [c for c in cells if c.cell_type == "markdown" and DISPLAY_MATH.search(c.source)
                       and slides.prose_words(c.source) <= MAX_WORDS]
    if short_equations:
        assert any(c.cell_type == "markdown" and DISPLAY_MATH.search(c.source) for c in tagged), \
            f"{path.name}: has display math but no slide shows any"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem[:2])
def test_slides_are_not_walls_of_prose(path):
    cells = nbformat.read(path, as_version=4).cells
    for i in slides.slide_cells(cells):
        cell = cells[i]
        if cell.cell_type == "markdown":
            words = slides.prose_words(cell.source)
            assert words <= MAX_WORDS, f"{path.name} cell {i}: {words} words of prose on one slide"
        elif "slide" in tags(cell) and "remove-input" not in tags(cell):
            lines = len(cell.source.strip().splitlines())
            assert lines <= MAX_LINES, f"{path.name} cell {i}: {lines} lines of code (tag it slide-output?)"


def test_prose_words_ignore_math_and_myst():
    assert slides.prose_words("## Title\n\nOne two $x_i$ {term}`three <Three>`.\n\n$$\na * b_c\n$$") == 3
    assert slides.myst_to_markdown("see {numref}`fig-x` {footcite:p}`vaswani2017`.") == "see the figure."


def test_a_plan_change_shows_in_the_decks(tmp_path):
    plan = slides.read_plan()
    numbers = sorted(int(p.name[:2]) for p in (ROOT / "chapters").glob("*.ipynb"))  # one session per chapter
    assert [s.number for s in plan] == numbers
    assert all(s.objectives and s.minutes > 0 for s in plan)
    text = slides.GUIDE.read_text(encoding="utf-8")
    shorter = tmp_path / "guide.md"
    shorter.write_text(re.sub(r"(?m)^\| (?:2|5|9) \| .*\n", "", text), encoding="utf-8")
    assert [s.number for s in slides.read_plan(shorter)] == [n for n in numbers if n not in (2, 5, 9)]
    six = slides.read_plan(plan="six")
    assert [s.number for s in six] == list(range(1, 7)), "the six-session decks are numbered 1 to 6"
    assert [s.chapter.name[:2] for s in six] == ["01", "02", "03", "04", "06", "07"]
    assert all(s.minutes <= 75 and s.objectives for s in six)
    decoder = slides.read_plan(plan="six-decoder")
    assert [s.chapter.name[:2] for s in decoder] == ["01", "02", "03", "04", "06", "09"]
    # only what the session's chapter needs is read at home: chapter 9 needs 7, not 8
    assert [s.read_before for s in decoder] == [[], [], [], [], [5], [7]]
    assert [s.read_before for s in six] == [[], [], [], [], [5], []]
    with pytest.raises(SystemExit, match="no course plan 'ten'"):
        slides.read_plan(plan="ten")


@pytest.fixture(scope="module")
def decks(tmp_path_factory) -> Path:
    """All the decks, written by tools/course/slides.py into a temporary folder (npm copies of reveal.js, MathJax)."""
    if shutil.which("npm") is None and not (slides.vendor.DEFAULT_PREFIX / "node_modules").is_dir():
        pytest.skip("npm is not installed, and no copy of reveal.js and MathJax is in build/vendor")
    out = tmp_path_factory.mktemp("slides")
    slides.build(out, redraw=False)  # the stored figures: drawing every chapter's again takes minutes
    return out


@pytest.fixture(scope="module")
def session_one(tmp_path_factory) -> Path:
    """Session 1's deck as `make slides` writes it: its figures drawn again at slide size."""
    if shutil.which("npm") is None and not (slides.vendor.DEFAULT_PREFIX / "node_modules").is_dir():
        pytest.skip("npm is not installed, and no copy of reveal.js and MathJax is in build/vendor")
    out = tmp_path_factory.mktemp("slides-1")
    (deck,) = slides.build(out, sessions={1})
    return deck


def test_one_deck_per_session_and_nothing_remote(decks):
    names = sorted(p.name for p in decks.glob("session-*.html"))
    assert names == [f"session-{s.number:02d}.html" for s in slides.read_plan()]
    index = (decks / "index.html").read_text(encoding="utf-8")
    assert all(name in index for name in names)
    for path in [*decks.glob("*.html"), *(decks / "vendor").rglob("*.css")]:
        found = REMOTE.search(path.read_text(encoding="utf-8"))
        assert found is None, f"{path.relative_to(decks)} loads {found.group(0)!r} from the network"
    for path in decks.glob("session-*.html"):
        for ref in re.findall(r'(?:src|href)="(vendor/[^"]+)"', path.read_text(encoding="utf-8")):
            assert (decks / ref).is_file(), f"{path.name} refers to {ref}, not in vendor/"


def _open_deck(offline, deck: Path):
    """The deck opened at its first slide, with reveal.js ready and its math typeset."""
    page = offline.page
    page.goto(deck.as_uri(), wait_until="load")
    page.wait_for_function("window.Reveal && Reveal.isReady() && window.MathJax && MathJax.startup"
                           " && MathJax.startup.document", timeout=20_000)
    page.evaluate("MathJax.startup.promise")
    return page


SLIDE_STATE = """() => {
  const slide = Reveal.getCurrentSlide();
  const copy = slide.cloneNode(true);
  copy.querySelectorAll('pre, aside, mjx-container').forEach(e => e.remove());
  return {
    index: Reveal.getIndices().h,
    text: copy.textContent,
    hasMath: slide.classList.contains('has-math'),
    typeset: slide.querySelectorAll('mjx-container').length,
    mathErrors: [...slide.querySelectorAll('[data-mjx-error]')].map(e => e.getAttribute('data-mjx-error')),
    images: [...slide.querySelectorAll('img')].map(i => i.complete && i.naturalWidth > 0),
    height: slide.scrollHeight,
    tooWide: [...slide.querySelectorAll('mjx-container > svg, img, pre, table')].filter(e =>
      e.getBoundingClientRect().right > slide.getBoundingClientRect().right + 1).map(e => e.tagName),
  };
}"""


@pytest.mark.parametrize("deck", ["session-02.html", "session-06.html"])  # session 1: its own test below
def test_every_slide_renders_offline(browser_tools, decks, deck):
    from tools.course.browser import offline_page

    with offline_page(allowed="file://", viewport={"width": 1280, "height": 720}) as offline:
        page = _open_deck(offline, decks / deck)
        seen = 0
        while True:
            state = page.evaluate(SLIDE_STATE)
            where = f"{deck} slide {state['index']}"
            assert not re.search(r"\\\(|\\\[|\$\$", state["text"]), f"{where}: raw math {state['text'][:300]!r}"
            assert not state["mathErrors"], f"{where}: MathJax errors {state['mathErrors']}"
            if state["hasMath"]:
                assert state["typeset"] > 0, f"{where}: math was not typeset"
            assert all(state["images"]), f"{where}: an image did not load {state['images']}"
            assert state["height"] <= 720, f"{where}: {state['height']} px high, more than the slide's 720"
            assert not state["tooWide"], f"{where}: wider than the slide: {state['tooWide']}"
            seen += 1
            if page.evaluate("Reveal.isLastSlide()"):
                break
            page.evaluate("Reveal.next()")
        assert seen >= 8
        assert not offline.aborted and not offline.errors, (offline.aborted, offline.errors)


def test_a_deck_prints_one_page_per_slide_with_its_figures(browser_tools, decks):
    """The handout PDF of session 1: a page per slide, and the page of its first figure slide is not blank below the
    title (reveal.js's print layout once pushed tall figures off their page)."""
    from PIL import Image

    deck = decks / "session-01.html"
    (pdf,) = slides.print_decks([deck])
    sections = deck.read_text(encoding="utf-8").count("<section")
    info = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True, check=True).stdout
    assert int(re.search(r"^Pages:\s+(\d+)", info, flags=re.MULTILINE).group(1)) == sections
    figure = next(k for k, part in enumerate(deck.read_text(encoding="utf-8").split("<section")[1:]) if "<img" in part)
    png = pdf.with_name("figure")
    subprocess.run(["pdftoppm", "-r", "20", "-png", "-singlefile", "-f", str(figure + 1), "-l", str(figure + 1),
                    str(pdf), str(png)], check=True)
    image = Image.open(png.with_suffix(".png")).convert("L")
    width, height = image.size
    below_title = image.crop((0, height // 5, width, height))
    ink = sum(1 for value in below_title.getdata() if value < 200) / (below_title.width * below_title.height)
    assert ink > 0.02, f"page {figure + 1} of {pdf.name} is blank below its title ({ink:.1%} ink)"


# Every text of the current slide as the screen shows it, in px: HTML text (its font size times reveal.js's scale),
# typeset math, and the smallest text of each figure (drawn at slide size: data-text-px at its width attribute).
TEXT_SIZES = """() => {
  const slide = Reveal.getCurrentSlide(), scale = Reveal.getScale();
  const sizes = [];
  for (const e of slide.querySelectorAll('*')) {
    if (e.closest('aside') || e.closest('mjx-container svg') || !e.getClientRects().length) continue;
    const own = [...e.childNodes].some(n => n.nodeType === Node.TEXT_NODE && n.textContent.trim());
    if (own || e.tagName === 'MJX-CONTAINER')
      sizes.push([e.tagName + ' ' + e.textContent.trim().slice(0, 30),
                  parseFloat(getComputedStyle(e).fontSize) * scale]);
  }
  for (const img of slide.querySelectorAll('img')) {
    const drawn = img.dataset.textPx ? parseFloat(img.dataset.textPx) : 0;  // 0: a figure not drawn for slides
    sizes.push(['IMG ' + img.getAttribute('src'),
                drawn * img.getBoundingClientRect().width / parseFloat(img.getAttribute('width') || img.naturalWidth)]);
  }
  return {index: Reveal.getIndices().h, height: slide.scrollHeight * scale, sizes};
}"""


def test_session_one_is_readable_at_1280_by_720(browser_tools, session_one):
    """At a projector's 1280 x 720, every text of session 1 (titles, lists, code, output, math, and the text inside
    its figures) is at least 18 px, each slide fits the screen, and its figures are the ones drawn for slides."""
    from tools.course.browser import offline_page

    with offline_page(allowed="file://", viewport={"width": 1280, "height": 720}) as offline:
        page = _open_deck(offline, session_one)
        figures = 0
        while True:
            state = page.evaluate(TEXT_SIZES)
            small = [(what, round(px, 1)) for what, px in state["sizes"] if px < 18]
            assert not small, f"slide {state['index']}: text below 18 px at 1280 x 720: {small}"
            assert state["height"] <= 720, f"slide {state['index']}: {state['height']:.0f} px high"
            figures += sum(what.startswith("IMG") for what, _ in state["sizes"])
            if page.evaluate("Reveal.isLastSlide()"):
                break
            page.evaluate("Reveal.next()")
        assert figures >= 3  # the schematic in two panels and the heatmap
        assert not offline.aborted and not offline.errors, (offline.aborted, offline.errors)


def test_slides_as_slides():
    session_1 = slides.build_deck(slides.read_plan()[0], slides.book_macros())
    titles = re.findall(r"<h3>(.*?)</h3>", session_1)
    steps = [int(m.group(1)) for t in titles for m in [re.search(r"Step (\d+)", t)] if m]
    assert steps == [1, 2, 3, 4, 5, 6], titles  # every step of the worked example, in order, one slide each
    step_slides = [body for body in session_1.split("<section")[1:] if re.search(r"<h3>Step \d", body)]
    assert all('<code class="python">' in body and 'class="output"' in body for body in step_slides), \
        "a step's slide shows its code and its numbers"
    assert not any("<strong>Step" in body for body in step_slides), "a step's name is its title, not said twice"
    assert len(set(titles)) >= len(titles) - 3, f"slides share titles: {titles}"
    assert any(t.startswith("In class, in pairs") for t in titles), "no slide states the in-class exercise"
    six = {session.number: session for session in slides.read_plan(plan="six")}
    fifth = slides.build_deck(six[5], slides.book_macros()).split("</section>", 1)[0]  # chapter 6, after 4
    assert "Read at home before this session: chapter 5" in fifth, fifth
    for session in slides.read_plan():
        deck = slides.build_deck(session, slides.book_macros())
        code = "\n".join(re.findall(r'<pre><code class="python">(.*?)</code></pre>', deck, re.S))
        assert not re.search(r"^\s*assert |check_close\(|assert_close\(", code, re.M), session.number
        printed = "\n".join(re.findall(r'<pre class="output"><code>(.*?)</code></pre>', deck, re.S))
        assert not re.search(r": ok$", printed, re.M), (session.number, printed)  # asserted in the book only
        opening = deck.split("<section", 2)[1]  # the title slide: its objectives' math typeset, not "$-\\infty$"
        assert "$" not in re.sub(r"<code>.*?</code>", "", opening), (session.number, opening)
        titles = [re.sub(r"<[^>]+>|\\[()]|\\[a-zA-Z]+|[{}_^]", "", t) for t in re.findall(r"<h3>(.*?)</h3>", deck)]
        assert max(map(len, titles)) <= slides.TITLE_CHARS + 4, (session.number, max(titles, key=len))  # one line
        repeated = [a for a, b in zip(titles, titles[1:], strict=False) if a == b]
        assert not repeated, f"session {session.number}: consecutive slides titled alike: {repeated}"
        long = [line for line in html.unescape(code).splitlines() if len(line) > slides.CODE_WIDTH
                and not re.search(r"""(["']).{40,}\1""", line)]
        assert not long, f"session {session.number}: code cut at the slide's edge: {long}"


def test_a_long_caption_makes_a_short_title():
    caption = ("The 2017 block as GPT-2 arranged it (left) and the Llama-style block (right), read bottom to top, "
               "each repeated $N$ times between the embedding and the output layer.")
    assert slides.shorten(caption) == "The 2017 block as GPT-2 arranged it and the Llama-style block"
    assert slides.shorten("Masks, weights and $f(x, y)$, for one query: the rest. More.", 20) == (
        "Masks, weights and $f(x, y)$")  # never cut inside math, nor after fewer than 15 characters
    assert slides.shorten("A short caption, kept whole. More.") == "A short caption, kept whole"
    assert slides.visible_length("over $d_{\\text{model}} = 4$") == len("over dmodel = 4")


def test_slide_code_drops_self_checks_only():
    source = ("z = f(x)  # (B, T, d)\nassert z.shape == (2, 3)\ntfm.check.check_close(z, ref, name='z')\n"
              "for a, b in pairs:\n    torch.testing.assert_close(a, b)\nfor a in xs:\n    print(a)\n    assert a\n"
              "def g(y):\n    assert y > 0\n    return y\n")
    assert slides.slide_code(source, later=["print(z)"]) == (  # z is read later: it stays
        "z = f(x)  # (B, T, d)\nfor a in xs:\n    print(a)\ndef g(y):\n    assert y > 0\n    return y")
    assert slides.slide_code("not python (") == "not python ("


def test_what_only_the_checks_used_leaves_the_slide_too():
    """A variable, an object and a print that only served a removed check go with it (a learner would ask what they
    are for), and so do their printed lines; what a later cell reads, or a print of a computed value, stays."""
    source = ("y = f(x)  # (B, T)\nref = nn.Linear(2, 2)\nref.weight.copy_(w)\ndiff = (ref(x) - y).abs().max()\n"
              "# the same function\nassert diff < 1e-6\nprint('f equals the layer: ok')\nprint(f'y: {y.shape}')\n")
    code, unprinted = slides.slide_parts(source)
    assert code == "y = f(x)  # (B, T)\nprint(f'y: {y.shape}')"
    printed = "f equals the layer: ok\ny: (2, 3)\n"
    assert slides.slide_stream(printed, unprinted) == "y: (2, 3)\n"
    assert "diff = " in slides.slide_code(source, later=["print(diff)"])  # a later cell reads it
    assert "diff = " not in slides.slide_code(source, later=["diff = 0\nprint(diff)"])  # bound again first
    assert "ref = " in slides.slide_code(source.replace("ref(x) - y", "y"), later=["print(ref)"])
    assert slides.slide_code("import math\nfrom torch import nn\n\nx = math.pi") == "x = math.pi"  # no imports
    loop = ("runs = run_both()\nfor step, (a, b) in enumerate(runs):\n    assert torch.equal(a, b)\n"
            "    print(f'step {step}: a = b exactly')\nprint(f'{len(runs)} steps')")
    code, unprinted = slides.slide_parts(loop)  # a claim that only counts its loop goes, with its lines
    assert code == "runs = run_both()\nprint(f'{len(runs)} steps')", code
    assert slides.slide_stream("step 0: a = b exactly\nstep 1: a = b exactly\n2 steps\n", unprinted) == "2 steps\n"
    bare = "for step in steps:\n    assert ok(step)\n    print(f'{step}')"  # its lines are not told apart: kept
    assert slides.slide_parts(bare) == ("for step in steps:\n    print(f'{step}')", [])
    headed = "print('the mask:')\nprint(mask.int())\nassert mask.any()"  # a heading of what it prints: kept
    assert slides.slide_code(headed, later=["mask"]) == "print('the mask:')\nprint(mask.int())"
    no_checks = "diff = a - b\nprint('a and b: ok')"  # nothing removed: nothing else goes
    assert slides.slide_code(no_checks) == no_checks
    shown = slides.slide_stream("✓ Z matches (shape (5, 2), every entry within 1e-05)\nweights sum to 1: ok\n"
                                "a table  ok\n", [])
    assert shown == "weights sum to 1\na table  ok\n"  # the echo goes, a claim keeps its words, a column stays
    result = "✓ peak memory falls below half: 50 MiB -> 17 MiB\n✓ every row of A sums to 1\n"
    assert slides.slide_stream(result) == "✓ peak memory falls below half: 50 MiB -> 17 MiB\n"  # output alone


def test_code_on_slides_fits_and_means_the_same():
    """Every code line of every deck within slides.CODE_WIDTH characters, except a line held by one long string
    (the browser wraps it), and the wrapped code is the same Python (the same syntax tree, a docstring's spaces and
    line breaks aside)."""
    import ast

    def same_program(a: str, b: str) -> bool:
        def tree(source):
            parsed = ast.parse(source)
            for node in ast.walk(parsed):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    node.value = " ".join(node.value.split())
            return ast.dump(parsed)
        return tree(a) == tree(b)

    doc = 'def f(x):\n    """' + "word " * 30 + 'end."""\n    return x'
    wrapped_doc = slides.wrap_code(doc, width=60)  # a docstring on lines of its own, within the width
    assert max(map(len, wrapped_doc.splitlines())) <= 60 and same_program(wrapped_doc, doc), wrapped_doc
    assert wrapped_doc.splitlines()[-2] == '    end."""' and not same_program(wrapped_doc, doc.replace("end", "x"))

    assert slides.wrap_code("x = compute(first_argument, second_argument)  # (B, T, d_model): a shape comment",
                            width=40) == ("# (B, T, d_model): a shape comment\nx = compute(first_argument,\n"
                                          "            second_argument)")  # under its bracket
    far = "a_long_name = some_function(first, second,\n" + " " * 28 + "third_argument)"
    assert slides.wrap_code(far.replace("second,", "second, fourth_argument,"), width=44) == (
        "a_long_name = some_function(first, second,\n    fourth_argument,\n    third_argument)")  # moved together
    split_f = 'y = f"{a} and " \\\n    f"{b + c} " \\\n    f"more text"'
    for long, short in [('f(x, "one two three four five")', 'f(x, "one two "\n  "three four five")'),
                        ('y = f"{a} and {b + c} more text"', split_f)]:
        assert slides.wrap_code(long, width=20) == short  # two adjacent strings, never cut inside a field
        assert ast.dump(ast.parse(short)) == ast.dump(ast.parse(long))  # the same string to Python
    assert slides.wrap_code("total = first_value + second_value", width=24) == (
        "total = first_value + \\\n    second_value")  # outside brackets: a backslash
    lined_up = "x = f(a,\n" + " " * 70 + 'b="one, two")  # the comment of a line moved left'
    assert slides.wrap_code(lined_up, width=60) == (
        'x = f(a,\n    # the comment of a line moved left\n    b="one, two")')  # its comment read where it was
    assert slides.wrap_code('the_label = "a string, with spaces"', width=20) == (
        'the_label = \\\n    "a string, " \\\n    "with spaces"')  # at a space outside it first
    wrapped = 0
    for chapter in CHAPTERS:
        cells = nbformat.read(chapter, as_version=4).cells
        for i in slides.slide_cells(cells):
            if cells[i].cell_type != "code":
                continue
            shown = slides.slide_code(cells[i].source)
            fitted = slides.wrap_code(shown)
            assert same_program(fitted, shown), f"{chapter.name} cell {i}"
            wrapped += fitted != shown
            for line in fitted.splitlines():
                if len(line) > slides.CODE_WIDTH:
                    assert re.search(r"""(["']).{40,}\1""", line), f"{chapter.name} cell {i}: {line!r}"
    # The chapters' code fits the page (79 characters, make lint), so it fits a slide (CODE_WIDTH) unwrapped; the
    # cases above exercise the wrapping.
    assert wrapped == 0


def test_a_slide_does_not_announce_what_it_does_not_show():
    assert slides.unannounced("Heads mix. Written exactly like that, with a loop over heads:") == "Heads mix."
    assert slides.unannounced("A heatmap shows it:") == "A heatmap shows it."
    assert slides.unannounced("Nothing announced. $x$ is 2.") == "Nothing announced. $x$ is 2."
    session_3 = slides.build_deck(slides.read_plan()[2], slides.book_macros())
    assert "loop over heads:" not in session_3  # the loop is not on a slide


def test_speaker_notes_keep_their_math():
    notes = slides._text("The *mean* of `x`: $\\mu = \\frac{1}{n} \\sum_i x_i$ and $$a_{t} * b_{#}$$\n## Next")
    assert notes == "The mean of x: $\\mu = \\frac{1}{n} \\sum_i x_i$ and $$a_{t} * b_{#}$$\nNext"


def test_a_figure_is_redrawn_with_readable_text_or_reported(tmp_path):
    """slide_figures.save raises small text to the slide's size; where the enlarged text would collide, it raises it
    less (16 px, 14, 12), else keeps the figure as drawn and names the collision, so that `make slides` reports it."""
    import matplotlib

    matplotlib.use("agg")
    import matplotlib.pyplot as plt

    from tools.course import slide_figures

    fig, ax = plt.subplots(figsize=(10, 5))
    ax.plot([0, 1], [0, 1])
    ax.set_title("a small title", fontsize=6)
    ax.tick_params(labelsize=5)
    readable = slide_figures.save(fig, tmp_path / "readable.png")
    assert readable.text_px >= slide_figures.TEXT_PX - 0.01 and not readable.problems, readable
    assert readable.width <= 1200 and readable.height <= 600 and max(readable.width - 1200, readable.height - 600) > -3
    fig, ax = plt.subplots(figsize=(10, 5))
    ax.set_xticks(range(80), [f"token {i}" for i in range(80)], fontsize=3)  # fits only at 3 pt
    crowded = slide_figures.save(fig, tmp_path / "crowded.png")
    assert crowded.overlaps and crowded.text_px < slide_figures.MIN_TEXT_PX, crowded
    fig, ax = plt.subplots(figsize=(10, 4))
    ax.set_xticks(range(42), [f"t{i:02d}" for i in range(42)], fontsize=5)  # 19 px collide; 16 px do not
    dense = slide_figures.save(fig, tmp_path / "dense.png")
    assert dense.text_px == slide_figures.SMALLER_TEXT_PX[0] and not dense.problems, dense  # larger than drawn


def test_titles_that_collide_go_on_two_lines(tmp_path):
    """Two side-by-side plots whose long titles run into each other once enlarged: the titles are set on two lines
    (never inside math) rather than the figure being given up."""
    import matplotlib

    matplotlib.use("agg")
    import matplotlib.pyplot as plt

    from tools.course import slide_figures

    assert slide_figures.break_line("time of one pass $(a + b)$ in ms") in ("time of one\npass $(a + b)$ in ms",
                                                                          "time of one pass\n$(a + b)$ in ms")
    assert slide_figures.break_line("$a + b$") is None and slide_figures.break_line("two\nlines") is None
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.5), layout="constrained")
    for ax in (left, right):
        ax.plot([1, 2, 3], [3, 1, 2])
    left.set_title("FLOPs of the layer's matrix products (GFLOP, counted by tfm.cost)", fontsize=5)
    right.set_title("time of one forward pass of the layer (ms, fastest of 5, one thread)", fontsize=5)
    shown = slide_figures.save(fig, tmp_path / "titles.png")
    assert not shown.problems and shown.text_px >= slide_figures.TEXT_PX - 0.5, shown


def test_a_tall_grid_of_plots_is_shown_row_by_row(tmp_path):
    """Two plots one above the other, too tall for their tick labels to be enlarged without colliding: each row on a
    slide of its own, at the larger size a row can be shown at; a figure of one row stays whole."""
    import matplotlib

    matplotlib.use("agg")
    import matplotlib.pyplot as plt

    from tools.course import slide_figures

    fig, axes = plt.subplots(2, 1, figsize=(6, 10))
    for ax in axes:
        ax.plot(range(100, 1100, 100), range(10))
        ax.set_xticks(range(100, 1100, 100), [str(v) for v in range(100, 1100, 100)], fontsize=6)
        ax.plot(range(100, 1100, 100), range(10, 0, -1), label="falling")
    fig.suptitle("Two rows")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="lower center")  # the figure's: on every row's slide
    assert [len(row) for row in slide_figures.rows(fig)] == [1, 1]
    panels = slide_figures.save_figure(fig, tmp_path / "grid.png")
    assert [p.file for p in panels] == ["grid-row0.png", "grid-row1.png"], panels
    assert all(not p.problems and p.text_px * (1 - slide_figures.MARGIN) >= 18 for p in panels), panels
    # each row laid out as a figure of its own: a row's shape, not a page with the other row's space left blank
    assert all(p.height <= 1.25 * p.width for p in panels), panels
    assert fig.get_size_inches().tolist() == [6, 10]  # the figure as it was, after the rows
    assert not (tmp_path / "grid.png").exists()
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.plot([1, 2], [1, 2])
    assert [p.file for p in slide_figures.save_figure(fig, tmp_path / "one.png")] == ["one.png"]


def test_a_legend_under_a_grid_clears_the_enlarged_labels(tmp_path):
    """A grid laid out once for the page (fig.tight_layout) with the figure's legend under it, as chapter 13 draws
    its loss curves: laid out again, the legend moved under the enlarged tick and axis labels, all readable. The
    ticks of an axes drawn with axis("off") are not texts of the figure."""
    import matplotlib

    matplotlib.use("agg")
    import matplotlib.pyplot as plt

    from tools.course import slide_figures

    fig, axes = plt.subplots(2, 2, figsize=(10, 7), sharex=True)
    for k, ax in enumerate(axes.flat):
        ax.plot(range(10), [(k + i) % 4 / 4 for i in range(10)], "o-", label="masked LM")
        ax.axhline(0.5, label="unigram")
        ax.set_title("all chosen positions (the training loss)", fontsize=10)
    for ax in axes[1]:
        ax.set_xlabel("pretraining step (64 windows each)")
    fig.legend(*axes[0, 0].get_legend_handles_labels(), loc="lower center", ncol=2, fontsize=9,
               bbox_to_anchor=(0.5, -0.05))
    fig.suptitle("Pretraining a 2-layer encoder: the held-out loss, position by position")
    fig.tight_layout()
    shown = slide_figures.save(fig, tmp_path / "curves.png", close=False)
    assert not shown.problems and shown.text_px * (1 - slide_figures.MARGIN) >= 18, shown
    renderer = fig.canvas.get_renderer()
    assert fig.legends[0].get_window_extent(renderer).y1 <= min(ax.get_tightbbox(renderer).y0 for ax in fig.axes)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(12, 2))
    ax.text(0.5, 0.5, "a drawing, not a plot")
    ax.axis("off")
    fig.canvas.draw()
    assert [t.get_text() for t in slide_figures._texts(fig)] == ["a drawing, not a plot"]
    plt.close(fig)


def _drawing(width: float, height: float):
    """A figure drawn as tools/figures draws a schematic: one axes over all of it, in inches, without axes."""
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(width, height))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.axis("off")
    return fig, ax


def test_a_line_at_the_figures_edge_is_saved_whole(tmp_path):
    """A schematic's long caption makes its right edge: the PNG shows all of it. (Hinted glyphs are 2% wider at the
    saving resolution than where the figure was measured, which cut the caption of chapter 12's text_to_rows.)"""
    import matplotlib

    matplotlib.use("agg")
    import numpy as np
    from PIL import Image

    from tools.course import slide_figures

    fig, ax = _drawing(11, 5.1)
    ax.text(0.2, 4.5, "text", fontsize=13, fontweight="bold")
    ax.text(2.1, 3.2, "BPE: replay the learned merges inside each word (orange: a word never seen in training, in "
            "two known pieces)", fontsize=11, color="grey")
    shown = slide_figures.save(fig, tmp_path / "caption.png")
    assert not shown.problems, shown
    ink = np.asarray(Image.open(tmp_path / "caption.png").convert("L")) < 250
    assert not ink[:, -4:].any(), "the caption is cut at the figure's right edge"


def test_a_label_stays_in_its_box_and_a_note_in_its_plot(tmp_path):
    """Texts drawn in boxes (tokens, a grid's numbers) that the enlarging would make wider than their boxes are
    enlarged less, so that each stays in its box; a note written in a plot that crosses the plot's frame is reported."""
    import matplotlib

    matplotlib.use("agg")
    import matplotlib.pyplot as plt

    from tools.course import slide_figures

    fig, ax = _drawing(12, 3)
    for i, token in enumerate(["the</w>", "bitwise</w>", "version</w>"]):  # 1.6 in apart: they never meet
        ax.add_patch(plt.Rectangle((0.2 + 1.6 * i, 1), 1.0, 0.4, facecolor="none"))
        ax.text(0.7 + 1.6 * i, 1.2, token, ha="center", va="center", fontsize=8)
    shown = slide_figures.save(fig, tmp_path / "tokens.png", close=False)
    assert not shown.problems and shown.text_px < slide_figures.TEXT_PX, shown  # 19 px would leave the boxes
    renderer = fig.canvas.get_renderer()
    for text, box in zip(ax.texts, ax.patches, strict=True):
        inside, extent = box.get_window_extent(renderer), text.get_window_extent(renderer)
        assert inside.x0 <= extent.x0 and extent.x1 <= inside.x1, text.get_text()
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(6, 3.4), layout="constrained")
    ax.plot([1, 2, 3], [1, 2, 3], "o-")
    ax.annotate("T=1536", (3, 3), textcoords="offset points", xytext=(5, -12), fontsize=8)  # past the frame
    crossing = slide_figures.save(fig, tmp_path / "note.png")
    assert "T=1536 | the plot's frame" in crossing.overlaps, crossing


def test_a_legend_that_grows_over_the_data_moves_off_it(tmp_path):
    """A plot's legend, clear of the lines as drawn for the page but over them once enlarged (as in chapter 15's cache
    sizes): placed where it covers nothing, else under the plot, the figure made taller so the plot keeps its size."""
    import matplotlib

    matplotlib.use("agg")
    import matplotlib.pyplot as plt

    from tools.course import slide_figures

    lengths = [1024, 2048, 4096, 6144, 8192]
    fig, ax = plt.subplots(figsize=(6, 3.4), layout="constrained")
    for per_token, marker, name in [(512, "o", "MHA, h_kv = 32 (Llama-2-7B): 512 KiB per token"),
                                    (128, "s", "GQA, h_kv = 8 (Llama-3-8B): 128 KiB per token"),
                                    (16, "^", "MQA, h_kv = 1: 16 KiB per token")]:
        ax.plot(lengths, [n * per_token / 2**20 for n in lengths], marker + "-", label=name)
    ax.set(xlabel="tokens in the context (one sequence)", ylabel="key/value cache (GiB, bfloat16)",
           title="Cache of a 32-layer model with 32 query heads of 128")
    ax.legend()
    shown = slide_figures.save(fig, tmp_path / "cache.png", close=False)
    assert not shown.problems and shown.text_px * (1 - slide_figures.MARGIN) >= 18, shown
    renderer = fig.canvas.get_renderer()
    legend = ax.get_legend().get_window_extent(renderer)
    for line in ax.get_lines():
        assert not line.get_transform().transform_path(line.get_path()).intersects_bbox(legend, filled=False)
    assert fig.get_size_inches()[1] > 3.4 and ax.bbox.height * 72 / fig.dpi > 150  # taller, the plot not squeezed
    plt.close(fig)


def test_a_tall_schematic_is_shown_in_readable_panels(tmp_path):
    from tools.course import slide_figures, slide_panels

    panels = slide_panels.schematic("qkv_flow", tmp_path / "01-12.png")
    assert len(panels) == len(slide_panels.PANELS["qkv_flow"]) == 2
    for panel in panels:
        assert panel.text_px >= slide_figures.TEXT_PX and not panel.problems, panel
        assert (tmp_path / panel.file).is_file()
    with pytest.raises(ValueError, match="no schematic"):
        slide_panels.schematic("no_such_figure", tmp_path / "x.png")


def test_a_key_and_the_drawing_it_explains_share_a_slide(tmp_path):
    """A panel of several rectangles (chapter 16's stages with their key under them) is one image: the parts one
    above the other at one scale, within the slide's box, its text readable; the parts' own files are gone."""
    from PIL import Image

    from tools.course import slide_figures, slide_panels

    first, _ = slide_panels.schematic("zero_stages", tmp_path / "16-40.png")
    parts = slide_panels.rectangles(slide_panels.PANELS["zero_stages"][0])
    assert len(parts) == 2
    wide, tall = max(x1 - x0 for x0, x1, _, _ in parts), sum(y1 - y0 for _, _, y0, y1 in parts)
    per_inch = min(slide_figures.BOX[0] / wide, slide_figures.BOX[1] / tall)
    assert abs(first.width - wide * per_inch) <= 2 and abs(first.height - tall * per_inch) <= 2, first
    with Image.open(tmp_path / first.file) as image:
        assert abs(image.width - 2 * first.width) <= 2 and abs(image.height - 2 * first.height) <= 2
    assert first.text_px >= slide_figures.MIN_TEXT_PX and not first.problems, first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["16-40-0.png", "16-40-1.png"]


def test_no_panel_cuts_through_a_box_or_a_text():
    """Every panel of every schematic shown in panels leaves each box and text whole (in it or out of it) and no
    frame's edge as a stray line; a panel that cuts through the scores of qkv_flow is caught."""
    import matplotlib

    matplotlib.use("agg")
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from tools.course import slide_panels

    for name, panels in slide_panels.PANELS.items():
        fig = slide_panels._draw_schematic(name)
        FigureCanvasAgg(fig)
        for k, panel in enumerate(panels):
            for part in slide_panels.rectangles(panel):
                assert not slide_panels.cut_through(fig, part), (name, k, slide_panels.cut_through(fig, part))
    fig = slide_panels._draw_schematic("qkv_flow")
    FigureCanvasAgg(fig)
    assert len(slide_panels.cut_through(fig, (0.0, 7.5, 4.4, 9.1))) == 10  # the five score boxes and their texts
    assert slide_panels.cut_through(fig, (0.1, 7.5, 0.0, 9.1)) == []  # nothing cut by a margin


def test_a_row_of_many_heads_is_shown_a_few_heads_a_slide(tmp_path):
    """Heads side by side, as chapter 8 shows its twelve, have token labels too dense for 18 px even one row a
    slide: each row is shown in parts of a few heads, every part readable, in reading order."""
    import matplotlib

    matplotlib.use("agg")
    import torch

    import tfm
    from tools.course import slide_figures

    tokens = ["[CLS]", "the", "animal", "didn", "'", "t", "cross", "the", "street", "because", "it", "was", "[SEP]"]
    weights = torch.softmax(torch.randn(4, 13, 13, generator=torch.Generator().manual_seed(0)), -1)
    fig = tfm.viz.plot_heads(weights, tokens, ncols=4, title="four heads")
    parts = slide_figures.save_figure(fig, tmp_path / "heads.png")
    assert [p.file for p in parts] == ["heads-row0-0.png", "heads-row0-2.png"], parts
    assert all(not p.problems and p.text_px * (1 - slide_figures.MARGIN) >= 18 for p in parts), parts
    assert not (tmp_path / "heads.png").exists() and all((tmp_path / p.file).exists() for p in parts)


def test_the_documented_command_works_with_a_relative_folder():
    """`make slides PLAN=six` passes a folder relative to the repository (build/slides-six); the figures are drawn
    in a kernel that runs in chapters/, so a path not resolved first sent them to a folder that did not exist."""
    if shutil.which("npm") is None and not (slides.vendor.DEFAULT_PREFIX / "node_modules").is_dir():
        pytest.skip("npm is not installed, and no copy of reveal.js and MathJax is in build/vendor")
    out = Path("build") / "slides-relative-test"
    try:
        result = subprocess.run([sys.executable, "-m", "tools.course.slides", str(out), "--plan", "six",
                                 "--session", "1", "--no-pdf"], cwd=ROOT, capture_output=True, text=True)
        assert result.returncode == 0, result.stderr[-2000:]
        deck = ROOT / out / "session-01.html"
        figures = sorted((ROOT / out / "fig").glob("*.png"))
        assert deck.is_file() and figures, (result.stdout[-1000:], figures)
        assert all(f"fig/{figure.name}" in deck.read_text(encoding="utf-8") for figure in figures[:3])
    finally:
        shutil.rmtree(ROOT / out, ignore_errors=True)
