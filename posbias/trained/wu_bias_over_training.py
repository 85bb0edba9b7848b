"""Position bias over training: Figure 2's networks of ``configs`` (typed by :func:`parse_fig2`).

With ``stop_rule`` ``none`` (the fixed-budget study, :mod:`posbias.analysis.budget`): each trains exactly
``steps`` (depth below 6) or ``steps_deep`` (depth 6 and more) with a held-out set of ``n_heldout``
sequences, ``wide_seeds`` as well for ``wide_configs``; a network whose committed record of the
``converged`` profile the design admits is not trained again. Under a stopping rule (the earlier
``converged`` campaign): each trains until the rule holds, ``steps`` at most.
"""
from posbias.trained import Config, TrainedChapter, fig2_config, parse_fig2


def configs(p) -> list[Config]:
    out = []
    for text in p["configs"]:
        name, depth = parse_fig2(text)
        if p["stop_rule"] != "none":
            out.append(fig2_config(name, depth, stop_rule=p["stop_rule"]))
        else:
            wide = tuple(p["wide_seeds"]) if text in p["wide_configs"] else ()
            out.append(fig2_config(name, depth, steps=p["steps"] if depth < 6 else p["steps_deep"], more_seeds=wide,
                                   n_heldout=p["n_heldout"]))
    return out


DECLARATION = TrainedChapter(configs, admits_from="converged")
