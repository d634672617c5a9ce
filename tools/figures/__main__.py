"""Redraw every schematic figure (`make figures`)."""

from tools.figures import attention, blocks, language, model, tokens


def main() -> None:
    for draw in attention.FIGURES + model.FIGURES + tokens.FIGURES + language.FIGURES + blocks.FIGURES:
        draw()


if __name__ == "__main__":
    main()
