"""The science core: masks, attention, rollout, the closed forms, the LayerNorm stack, the task, the model, baselines.

The layer every other one stands on. It imports only torch, numpy, scipy, the standard library and itself
(``tests/test_layout.py``), so a reader can lift it out with no part of the book's machinery.
"""
