"""The English corpus that ships with tfm (src/tfm/corpora/python_reference.txt, the prose of Python's documentation):
`make_corpus.py` wrote the snapshot once (`python -m tools.corpus.make_corpus`); tests/test_corpus.py checks that it
still writes the same bytes. No `make` target runs it: the snapshot is fixed so that every machine reads one text.
"""
