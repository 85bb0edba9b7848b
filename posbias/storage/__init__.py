"""Results kept and traced: the store, provenance, parked checkpoints, recomputations, a run's record of checks.

Above :mod:`posbias.science`; below everything that trains, measures or builds.
"""
