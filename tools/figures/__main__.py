"""Redraw every schematic figure (`make figures`)."""

from tools.figures import attention, blocks, language, model, tokens, training


def drawers() -> list:
    """Every schematic's drawing function, named as its file (`qkv_flow` draws qkv_flow.svg)."""
    return (attention.FIGURES + model.FIGURES + tokens.FIGURES + language.FIGURES + blocks.FIGURES
            + training.FIGURES)


def main() -> None:
    for draw in drawers():
        draw()


if __name__ == "__main__":
    main()
