"""Studies and claims read off stored networks: the fixed-budget study, the jump, what the networks learned, claims.

Above :mod:`posbias.training`, whose stored units it reads; below the figures and the book.
"""
