"""The book's schematic figures, drawn from code as SVG files into src/tfm/schematics/ (shipped with tfm, shown by
`tfm.viz.schematic`). `make figures` (`python -m tools.figures`) redraws every one; the output is byte-identical when
nothing changed.

- style.py      fonts, colours and drawing helpers shared by every figure (imports nothing from this folder)
- attention.py  chapters 1-4, computed from the worked example "dogs chase the red ball"
- model.py      chapters 5, 6, 7, 9 and 10
- tokens.py     chapter 12
- language.py   chapter 14: the induction-head circuit
- blocks.py     chapter 15: the 2017 block beside today's (Llama-style) block
- training.py   chapter 16: what each ZeRO stage shards

Each figure is one function listed in its module's FIGURES; change it and redraw, never edit an SVG by hand.
"""
