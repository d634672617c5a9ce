"""Executing and checking the book's notebooks.

- notebooks.py          the list of chapters, their time budgets, the book's environment, one execution (shared)
- execute_notebooks.py  re-runs notebooks in place to refresh their stored outputs (`make execute`)
- colab_env.py          the folder `make notebooks` runs in: chapters alone, tfm from a built wheel, as in Colab
- student_edition.py    the student edition: solutions removed (`make student`), or kept outputs for `make test`'s
                        student pass (`--keep-outputs`), which re-runs it on a second numeric path under strict nbval
- page_width.py         code and printed lines wider than the page, named by cell (`make lint`)
- figure_text.py        an IPython extension `make execute` loads: each figure stored with the size of its smallest
                        text, which tests/test_figures.py reads
- exercises.py          the structure of an exercise (stub, check, hidden solution), read from a notebook
- myst.py               MyST (roles, directives) as plain Markdown, for what is read outside the website
- robustness.py         every trained claim over seeds and numeric paths (`make robustness`)
- pretraining_budget.py chapter 13's masked LM pretrained longer, local and full attention, read by the probe
                        (`make pretraining-budget`)
- block_sweep.py        chapter 15's five blocks over a grid of learning rates and seeds (`make block-sweep`)
- scaling.py            chapter 14's longer runs: its checkpoints and loss against model size (`make scaling`)
- data_sweep.py         chapter 14's larger text: loss against distinct data and size, its long-context model
                        (`make data-sweep`)
- context_use.py        how far back the long-context models look: context swap, induction oracle, repeat test
                        (`make data-sweep`, after their training)
- mutation_check.py     breaks tfm on purpose and checks that the tests notice (run by hand)

Imports nothing from the other folders of tools/.
"""
