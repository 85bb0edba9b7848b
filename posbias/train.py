"""The chapters' entry point to training: everything a chapter or a reader's script calls, from
:mod:`posbias.training` (the loop, checkpoints, campaigns, planning, the Dask engine, status)."""
from .training import *  # noqa: F401,F403
from .training import __all__  # noqa: F401
