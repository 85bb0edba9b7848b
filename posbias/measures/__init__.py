"""Measurements of trained networks and the statistics the verdicts read: accuracies, gaps, sinks, convergence.

Above :mod:`posbias.storage`; :mod:`posbias.training` measures its networks with it.
"""
