"""Redraw every schematic figure (`make figures`)."""

from tools.figures import attention, blocks, language, model, tokens, training


def main() -> None:
    for draw in (attention.FIGURES + model.FIGURES + tokens.FIGURES + language.FIGURES + blocks.FIGURES
                 + training.FIGURES):
        draw()


if __name__ == "__main__":
    main()
