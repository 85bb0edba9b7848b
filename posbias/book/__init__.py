"""The book's machinery: chapters and their parameters, running, building, citing, costs, the mutation suite, the CLI.

The top layer: it may import every other one, and none imports it (``tests/test_layout.py``).
"""
