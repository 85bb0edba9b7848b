"""What the register's judge says, as tables for the pages: every entry judged (:func:`table`), the same
in parts narrow enough for a page's column (:func:`brief`, :func:`record`), and the coverage list of the
paper's sentences (:func:`coverage`, :func:`coverage_table`). Imported as ``posbias.analysis.claims.tables``: the
package does not re-export it, so that the package never imports the module that reads it."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import yaml

from posbias.analysis.claims import REGISTER, STATUSES, Judged, _chance, register

__all__ = ["table", "brief", "record", "coverage", "coverage_table", "uncommitted_words"]


def coverage(path: Path | str = REGISTER) -> list[dict[str, Any]]:
    """The register's coverage list: every trained-network sentence of the paper's Sections 5.1, 5.2,
    K.1 and K.2, each ``{sentence, where}`` with ``entries`` (ids) or ``none`` (why no entry judges it)."""
    return list(yaml.safe_load(Path(path).read_text()).get("coverage", []))


def coverage_table(judged: Sequence[Judged]):
    """A ``pandas.DataFrame`` of the coverage list: where, the sentence, and its entries' verdicts after
    Holm (counted per status) or why no entry judges it."""
    import pandas as pd  # lazy: pandas costs ~0.5s at import

    by = {j.entry.id: j for j in judged}
    rows = []
    for c in coverage():
        if "entries" in c:
            hs = [by[i].holm for i in c["entries"] if i in by]
            judged_ = ", ".join(f"{hs.count(s)} {s}" for s in STATUSES if hs.count(s))
            on_sc = sum(by[i].holm == "reproduced" and bool(by[i].shortcut) for i in c["entries"] if i in by)
            rows.append({"where": c["where"], "sentence": c["sentence"], "entries": len(c["entries"]),
                         "after Holm": judged_ + (f" ({on_sc} on a shortcut)" if on_sc else "")})
        else:
            rows.append({"where": c["where"], "sentence": c["sentence"], "entries": 0,
                         "after Holm": "no entry: " + c["none"]})
    return pd.DataFrame(rows)


def _pm(x: tuple[float, float, str] | None) -> str:
    return "" if x is None else f"{x[0]:+.3f} ± {x[1]:.3f} ({x[2]})"


def _retrieve(j: Judged) -> str:
    """How many of the entry's networks retrieve (``posbias.science.retrieval``), and a mark where most do not."""
    if not j.retrieval:
        return ""
    got = sum(n.get("retrieves", 0) for n in j.retrieval.values())
    total = sum(sum(n.values()) for n in j.retrieval.values())
    return f"{got} of {total}" + (" (most do not retrieve)" if j.not_retrieving else "")


def uncommitted_words(j: Judged) -> str:
    """``"trained partly from uncommitted code: decay|2 (5 of 5)"``: the entry's configurations whose networks
    trained partly from uncommitted code (:func:`posbias.training.campaigns.from_uncommitted_code`, issue 95)
    and how many of their networks; empty where none did."""
    if not j.uncommitted:
        return ""
    return "trained partly from uncommitted code: " + ", ".join(f"{c} ({k} of {j.n_seeds})"
                                                               for c, k in j.uncommitted.items())


def table(judged: Sequence[Judged]):
    """A ``pandas.DataFrame``, one row per entry: id, what is measured, verdict, after Holm, mean ± SE,
    the distinct runs behind it (of the seeds stored), the guards, the second reading, the contrast
    under uniform attention, the accuracy at slots the training never rewarded (chance 1/32), the
    networks' share of the ceiling, the convergence note (with the networks trained partly from
    uncommitted code, :func:`uncommitted_words`), and how many of its networks retrieve."""
    import pandas as pd  # lazy: pandas costs ~0.5s at import

    share = register().judge.share
    chance = _chance()
    rows = []
    for j in judged:
        done = j.mean is not None
        mean = f"{j.mean:+.3f} ± {j.se:.3f}" if done else "units missing: " + ", ".join(j.units_missing)
        if done and j.entry.margin is not None:
            mean += f" (margin {j.entry.margin:.2f})"
        runs = "" if not done else (f"{j.n_runs}" if j.n_runs == j.n_seeds
                                    else f"{j.n_runs} distinct of {j.n_seeds}")
        if done and j.copies:
            runs += " (" + ", ".join(f"{c}: {j.n_seeds - k} distinct" for c, k in j.copies.items()) + ")"
        untrained = ", ".join(f"{a:.3f}" + (" (shortcut)" if c in j.shortcut else "")
                              for c, a in j.untrained.items())
        if j.share is None:
            nets = "cannot reach the ceiling" if done else ""
        else:
            nets = "not converged" if j.share < share else "converged"
        rows.append({"claim": j.entry.id, "measured": j.entry.reading, "where": j.entry.where,
                     "verdict": j.status, "after Holm": j.holm, "mean ± SE": mean, "runs": runs,
                     "guards": "; ".join(_pm(g) for g in j.guards),
                     "second reading": (f"{j.entry.second['label']}: {_pm(j.second)}" if j.second else ""),
                     "under uniform attention": "" if j.baseline is None else f"{j.baseline:+.3f}",
                     f"untrained slots (chance {chance:.3f})": untrained,
                     "share of ceiling": "" if j.share is None else f"{j.share:.2f}",
                     "networks": "; ".join(filter(None, [nets + (", accuracy still rising" if j.still_rising else ""),
                                                         uncommitted_words(j)])),
                     "networks that retrieve": _retrieve(j)})
    return pd.DataFrame(rows)


def brief(judged: Sequence[Judged]):
    """A ``pandas.DataFrame`` narrow enough for a page's column (issue 93), one row per entry: what is
    measured, in words; the verdict after Holm; mean ± SE; and the networks behind it, in words (converged
    or not, whether most retrieve). The full record of each entry is :func:`table`."""
    import pandas as pd  # lazy: pandas costs ~0.5s at import

    share = register().judge.share
    rows = []
    for j in judged:
        done = j.mean is not None
        if not done:
            nets = "not all trained yet"
        elif j.share is None:
            nets = "cannot reach the ceiling"
        else:
            nets = "converged" if j.share >= share else "not converged"
        if done and j.not_retrieving:
            nets += ", most do not retrieve"
        mean = f"{j.mean:+.3f}\u00a0±\u00a0{j.se:.3f}" if done else "not yet"     # kept on one line
        rows.append({"claim, as measured": j.entry.reading, "after Holm": j.holm, "mean ± SE": mean,
                     "networks": nets})
    return pd.DataFrame(rows)


#: :func:`table`'s columns in the three parts of :func:`record` (the accuracy at untrained slots by the start of
#: its name, which carries the chance level).
RECORD_PARTS = (("claim", "verdict", "after Holm", "mean ± SE", "runs"),
                ("claim", "guards", "second reading", "under uniform attention", "untrained slots"),
                ("claim", "measured", "share of ceiling", "networks", "networks that retrieve"))


def record(judged: Sequence[Judged]) -> list:
    """:func:`table` in three ``DataFrame``s, each narrow enough for a page's column (issue 93): the verdicts, the
    guards and other readings, the networks. A column empty for every entry is left out; ``where`` (the
    paper's section, the same on a chapter's page) too."""
    full = table(judged)
    parts = []
    for names in RECORD_PARTS:
        cols = [c for c in full.columns if any(c == n or c.startswith(n + " (") for n in names)]
        cols = [c for c in cols if c == "claim" or (full[c].astype(str) != "").any()]
        if len(cols) > 1:
            parts.append(full[cols])
    return parts
