"""Hidden tests: code that tools/course/assignments.py appends to an exercise's graded check, between nbgrader's
`### BEGIN HIDDEN TESTS` and `### END HIDDEN TESTS`, so that the released notebook does not show it and the grader
runs it. They try the learner's answer on other sizes and other random inputs than the public check does, so that an
answer written for the public check's one case (a hard-coded size, a table of its expected outputs) scores 0.

Many public checks already try a second configuration (chapter 3's heads check runs h = 2 with other weights,
chapter 4's mask check a second batch); the exercises listed here are those whose public check tries one size only.
The book is public, and so is this file: an instructor who wants tests that no learner has read adds their own here
in a private copy of the repository. Each runs inside a function of its own, so that its names (`n`, `d_k`...)
never replace the chapter's.
"""

HIDDEN_TESTS: dict[str, str] = {
    "ch01-ex-softmax": """\
hidden = tfm.generator(11)
for n in (1, 4, 9):  # other lengths, random scores, some large enough to overflow exp
    scores_hidden = torch.randn(n, generator=hidden) * 400
    tfm.check.check_close(stable_softmax(scores_hidden), torch.softmax(scores_hidden, dim=0), rtol=0,
                          name=f"stable_softmax on {n} random scores", quiet=True)""",
    "ch01-ex-one-query": """\
hidden = tfm.generator(12)
for d_k, n, d_v in ((2, 4, 3), (6, 9, 1), (16, 2, 5)):  # other widths and lengths than the public check's
    q_h, K_h, V_h = (torch.randn(*s, generator=hidden) for s in ((d_k,), (n, d_k), (n, d_v)))
    z_h, a_h = tfm.attention(q_h[None], K_h, V_h)
    z_mine, a_mine = attend_one(q_h, K_h, V_h)
    tfm.check.check_close(a_mine, a_h[0], name=f"attend_one's weights with d_k = {d_k}", rtol=0, quiet=True)
    tfm.check.check_close(z_mine, z_h[0], name=f"attend_one's output with d_k = {d_k}", rtol=0, quiet=True)""",
}
