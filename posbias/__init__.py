"""posbias: position bias in transformers, derived, checked and reproduced. The library's layers, bottom up:

``science`` (the thin core), ``storage``, ``measures``, ``llm`` (a real decoder), ``trained`` (the trained
chapters' declarations), ``training``, ``analysis``, ``figures`` and ``book``. Each imports only the layers
below it, save the upward edges ``tests/test_layout.py`` names with their reasons.
"""
