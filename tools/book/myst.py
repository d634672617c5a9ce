"""MyST, the book's Markdown, as plain Markdown: for what a reader sees outside the website (slides, assignments
and the feedback notebooks of tools/course), where roles and directives would show raw."""

from __future__ import annotations

import re


def myst_to_markdown(text: str) -> str:
    """Turn the MyST a browser would show raw into plain Markdown: roles into their text, labels and fences away."""
    text = re.sub(r"\{(?:term|doc|ref)\}`([^`<]*?)\s*<[^`>]*>`", r"\1", text)
    text = re.sub(r"\{(?:term|ref)\}`([^`]*)`", r"\1", text)
    text = re.sub(r"\{doc\}`[^`]*`", "", text)
    text = re.sub(r"\{numref\}`[^`]*`", "the figure", text)
    text = re.sub(r"\{eq\}`[^`]*`", "the equation", text)
    text = re.sub(r"\s*\{footcite(?::[pt])?\}`[^`]*`", "", text)
    text = re.sub(r"(?m)^\([\w:-]+\)=\s*$", "", text)
    # a directive block keeps its content, without its fences and options; an unclosed fence line just goes
    text = re.sub(r"(?ms)^(:::+|```+)\{[^}]*\}[^\n]*\n(.*?)^\1[ \t]*$",
                  lambda m: re.sub(r"(?m)^:[a-z-]+:.*\n?", "", m.group(2)), text)
    text = re.sub(r"(?m)^(:::+|```+)\{[^}]*\}.*$|^:::+\s*$|^:[a-z-]+:.*$", "", text)
    return text
