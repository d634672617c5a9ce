"""The English corpora that ship with tfm, written once each from a fixed snapshot so that every machine reads one
text (no `make` target runs them):

- `make_corpus.py` wrote src/tfm/corpora/python_reference.txt (chapters 12 and 13: the pydoc topics of Python
  3.11.7); tests/test_corpus.py checks that it still writes the same bytes;
- `make_docs_corpus.py` wrote src/tfm/corpora/python_docs.txt.xz (chapter 14: the prose of the whole Python 3.11
  documentation, from Debian's python3.11-doc); tests/test_pydocs.py checks it the same way.
"""
