"""The trained chapters, one declaration each: which networks a chapter's parameters select.

A trained chapter is two files: its notebook, ``notebooks/<id>.md``, whose front matter declares
every parameter and every profile once, and its declaration, ``posbias/trained/<module>.py`` (the
id with ``_`` for ``-``), whose ``DECLARATION`` (a :class:`TrainedChapter`) turns the chapter's
resolved parameters into typed configurations (:class:`Config`). ``posbias campaign`` and the
notebook (``train.run_chapter_campaign``) both read it through :func:`posbias.training.units_of`;
the settings every unit shares (``steps``, ``seeds``, ``eval_every``, ``n_test``, ``n_sweep``,
``n_sink``, and ``test_seed`` where declared) are the chapter's parameters of those names.

A configuration's ``label`` is the name tables and the claim register give it (``"No PE|2"``); it is
written once, here, from typed fields, and new code reads the fields, never the label. (The frozen
judge, :mod:`posbias.measures.evaluate` and :mod:`posbias.analysis.claims`, still reads labels: its code is fixed with
the frozen register.)
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from posbias.science.model import MemberConfig

__all__ = ["Config", "TrainedChapter", "declaration", "FIG2_ARCHITECTURES", "fig2_name", "fig2_config"]


@dataclass(frozen=True)
class Config:
    """One configuration a campaign trains, for every seed of the chapter (and ``more_seeds``)."""

    label: str                                  # its name in tables and the register, e.g. "No PE|2"
    depth: int                                  # attention layers
    member: MemberConfig                        # mask, PE, residual, window or prefix
    target_slots: tuple[int, ...] | None = None  # slots the training targets sit in; None: unbiased
    steps: int | None = None                    # its own budget; None: the chapter's ``steps``
    more_seeds: tuple[int, ...] = ()            # seeds beyond the chapter's ``seeds`` (a wider study)
    stop_rule: str | None = None                # a rule of posbias.measures.convergence.RULES; None: exactly steps
    n_heldout: int | None = None                # sequences of the held-out set; None: none


@dataclass(frozen=True)
class TrainedChapter:
    """A trained chapter's networks: ``configs`` of its resolved parameters, in training order; or,
    for a chapter that reads another's networks, ``reads``: parameters -> (chapter, profile,
    overrides) of those. ``admits_from``: a profile of this chapter whose committed record of the same
    network may stand in for one of this profile's (``posbias.analysis.budget.admitted`` decides), so that the
    campaign does not train it again."""

    configs: Callable[[Mapping[str, Any]], list[Config]] | None = None
    reads: Callable[[Mapping[str, Any]], tuple[str, str, dict[str, Any]]] | None = None
    admits_from: str | None = None

    def __post_init__(self) -> None:
        if (self.configs is None) == (self.reads is None):
            raise ValueError("a trained chapter declares either its configs or the networks it reads, not both")


def declaration(chapter: str) -> TrainedChapter:
    """The declaration of ``chapter``; ``KeyError`` naming the trained chapters when it has none."""
    name = chapter.replace("-", "_")
    try:
        module = importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as e:
        if e.name != f"{__name__}.{name}":
            raise
        raise KeyError(f"chapter {chapter!r} trains no networks; chapters with a campaign: "
                       + ", ".join(trained_chapters())) from None
    decl = getattr(module, "DECLARATION", None)
    if not isinstance(decl, TrainedChapter):
        raise TypeError(f"{module.__file__}: DECLARATION must be a posbias.trained.TrainedChapter")
    return decl


def trained_chapters() -> list[str]:
    """The ids of the chapters with a declaration, sorted."""
    import pkgutil  # lazy: only an error message lists them

    return sorted(m.name.replace("_", "-") for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


# ---------------------------------------------------------------- Figure 2's three architectures
#: Figure 2's architectures by the name the paper gives them: the causal mask without PE, the decay
#: mask (a mask, not a PE) and the causal mask with RoPE.
FIG2_ARCHITECTURES: dict[str, tuple[str, str]] = {"No PE": ("causal", "none"), "decay": ("decay", "none"),
                                                  "RoPE": ("causal", "rope")}


def fig2_name(mask: str, pe: str) -> str:
    """The name Figure 2 gives the architecture ``(mask, pe)``: No PE, decay or RoPE."""
    return "decay" if mask == "decay" else ("RoPE" if pe == "rope" else "No PE")


def fig2_config(name: str, depth: int, residual: bool = False, **more: Any) -> Config:
    """Figure 2's architecture ``name`` (:data:`FIG2_ARCHITECTURES`) at ``depth``, labelled ``"name|depth"``."""
    if name not in FIG2_ARCHITECTURES:
        raise ValueError(f"unknown Figure 2 architecture {name!r}; choose one of {', '.join(FIG2_ARCHITECTURES)}")
    mask, pe = FIG2_ARCHITECTURES[name]
    return Config(f"{name}|{depth}", depth, MemberConfig(mask, pe, residual=residual), **more)


def parse_fig2(text: str) -> tuple[str, int]:
    """``"No PE|2"`` (a chapter parameter's value, as the reader types it) -> ``("No PE", 2)``."""
    name, _, d = text.partition("|")
    if name not in FIG2_ARCHITECTURES or not d.isdigit():
        raise ValueError(f"configuration {text!r}: give '<{'|'.join(FIG2_ARCHITECTURES)}>|<depth>'")
    return name, int(d)
