"""The course kit: what an instructor builds from the book, and the offline browser its checks use.

- assignments.py    every chapter as an nbgrader assignment (`make assignments`)
- grade.py          grades a folder of submissions with the book's exercise checks (`make grade`)
- apart.py          each check run again in a process the learner's code never ran in (the verdict grade.py keeps);
                    in_kernel.json lists the few exercises whose checks need the learner's objects themselves
- fresh_inputs.py   private hidden tests of the checks run apart: the learner's functions on fresh random inputs,
                    against the instructor's solution
- grading_guard.py  the audit hook and limits of grading kernels: no deleting files, reading the instructor's,
                    starting programs, ending kernels; 8 GiB of memory and 30 minutes of CPU time
- needed_cells.py   the cells that grading must run: those the checks depend on (the rest are left out)
- tampering.py      reads submitted answers for code that changes the grader instead of answering (scores 0)
- hidden_tests.py   nbgrader hidden tests: other sizes and inputs than the public checks try
- gradebook.py      one gradebook for the course, in the CSV layouts Canvas and Moodle import (`make gradebook`)
- slides.py         one reveal.js deck per course session, from the chapters' slide-tagged cells (`make slides`)
- slide_figures.py  the decks' figures drawn again at slide size, their text at least 18 px where the figure allows
- slide_panels.py   a schematic on slides in panels, in lecture order, cut where no box or text is cut through
- slide_redraw.py   a chapter's slide figures drawn again (`make slides`): schematics in panels, plots re-run
- pdf.py            the book as one PDF, printed by headless Chromium (`make pdf`)
- vendor.py         pinned npm copies of MathJax, d3, jQuery and reveal.js, so that nothing loads from a CDN
- website.py        the website's Sphinx extension (_config.yml): MathJax, d3 and jQuery served from the site itself,
                    and fixes of the pages the toolchain writes (a script declared twice, bibliography list items)
- browser.py        a local server and a Chromium page with the network cut off (PDF, slides and browser tests)

Imports from tools.book (the exercise structure, the notebooks, the student edition) and tools.figures (the
schematics, drawn again for slides), never the other way round.
"""
