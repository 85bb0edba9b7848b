"""One figure style and one ``save`` that writes PNG, SVG and PDF with their provenance embedded.

Files are byte-identical across builds of the same commit and parameters: no dates in the metadata,
a fixed SVG hash salt, and ``SOURCE_DATE_EPOCH`` honoured by the PDF backend.

A figure's caption is written once, in the chapter's ``{glue:figure}`` directive: ``posbias run`` passes
the chapter's captions as ``POSBIAS_CAPTIONS`` (JSON, :func:`posbias.book.chapters.figure_captions`) and
``save`` takes the figure's from there, its ``{glue:text}`` roles filled in (:func:`caption_for`).

The drawing helpers of the chapters' figures live beside it: :mod:`posbias.figures.wu` (Wu et al.'s
Figures 2-6), :mod:`posbias.figures.kim` (Kim et al.'s score maps) and :mod:`posbias.figures.comparisons` (the
front page's, toy vs real sinks). A chapter imports the package, ``from posbias import figures``: every public
name is here.
"""
from __future__ import annotations

# first: picks the backend
from posbias.figures.saving import FORMATS, SavedFigure, caption_for, resolve_glue, save, style
from posbias.figures.comparisons import hero_figure, sink_comparison_figure
from posbias.figures.kim import plot_score_map, score_map_grid
from posbias.figures.overtraining import bias_over_training_figure, budget_trajectories_figure, jump_figure
from posbias.figures.standing import standing_figure
from posbias.figures.wu import (alpha_profile_figure, attention_maps_figure, fig3_accuracy_figure,
                                fig3_gap_curves_figure, fig3_sweep_figure, fig4_accuracy_figure,
                                fig4_preference_curves_figure, fig4_sweep_figure, gap_bars_figure, gap_curves_figure,
                                sink_panels_figure)

__all__ = ["style", "save", "caption_for", "resolve_glue", "FORMATS", "SavedFigure",
           "gap_curves_figure", "gap_bars_figure", "attention_maps_figure", "alpha_profile_figure",
           "sink_panels_figure", "fig3_accuracy_figure", "fig4_accuracy_figure", "fig3_sweep_figure",
           "fig4_sweep_figure", "fig3_gap_curves_figure", "fig4_preference_curves_figure",
           "sink_comparison_figure", "hero_figure", "bias_over_training_figure", "budget_trajectories_figure",
           "jump_figure", "standing_figure", "plot_score_map", "score_map_grid"]
