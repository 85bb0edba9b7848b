"""The statistics of the verdicts: a mean over runs with its standard error, Student's t, Holm's
correction over a family of claims, and the exact test of a rate. Pure functions of numbers; no
networks, no claims."""
from __future__ import annotations

import torch

__all__ = ["seed_mean_se", "t_critical", "p_value", "verdict", "holm", "rate_verdict", "within_bound", "family_z",
           "tost", "seeds_needed", "floor_binds"]


def seed_mean_se(values, n_test: int, coef2: float = 2.0) -> tuple[float, float]:
    """Mean over seeds of a contrast of test accuracies and its standard error, as the register's judge
    computes it (:func:`posbias.analysis.claims.judge`).

    The contrast is ``sum_i c_i acc_i`` over accuracies on distinct test sets of ``n_test`` sequences each;
    ``coef2 = sum_i c_i^2`` (2 for a gap ``acc_ab - acc_ba``, 4 for a difference of two gaps). The error adds
    the spread between seeds (sample variance / n, zero with one seed) and the binomial noise of the test sets,
    at most ``coef2 / (4 n_test)`` (each accuracy has variance ``<= 1/(4 n_test)``). That bound is *not* divided
    by the number of seeds: every seed is tested on the same sequences (``train.TEST_SEED``), so the part of
    the test noise that the seeds share does not average out over them (the part they do not share is
    already in the spread between seeds, which makes the sum an upper bound).
    """
    v = torch.as_tensor(values, dtype=torch.float64).flatten()
    n = v.numel()
    var_seed = float(v.var(unbiased=True)) if n > 1 else 0.0
    return float(v.mean()), float((var_seed / n + coef2 / (4 * n_test)) ** 0.5)


def t_critical(n_runs: int, level: float = 0.05) -> float:
    """Two-sided critical value of Student's t with ``n_runs - 1`` degrees of freedom at ``level``
    (2.776 at 5 runs, 0.05): a claim's mean must lie this many standard errors from zero.

    With one run there is no spread between runs to estimate and the standard error is the
    binomial bound of the test sets alone, a known variance: the normal quantile (1.960) is used.
    """
    from scipy import stats

    if n_runs < 2:
        return float(stats.norm.ppf(1 - level / 2))
    return float(stats.t.ppf(1 - level / 2, n_runs - 1))


def p_value(mean: float, se: float, n_runs: int) -> float:
    """Two-sided p-value of ``mean / se`` under Student's t with ``n_runs - 1`` degrees of freedom
    (normal with one run, as :func:`t_critical`); 1.0 for a zero mean, 0.0 for a zero error."""
    from scipy import stats

    if mean == 0:
        return 1.0
    if se == 0:
        return 0.0
    t = abs(mean) / se
    return float(2 * (stats.norm.sf(t) if n_runs < 2 else stats.t.sf(t, n_runs - 1)))


def verdict(mean: float, se: float, sign: int = 1, z: float | None = None, *, n_runs: int | None = None,
            level: float = 0.05) -> str:
    """``reproduced`` if ``sign * mean > z * se``, ``contradicted`` if ``sign * mean < -z * se``, else
    ``inconclusive``: a claim "this quantity is positive" (``sign=+1``) or "negative" (``sign=-1``).

    The threshold ``z`` is, unless given, Student's t critical value for ``n_runs`` runs
    (:func:`t_critical`, ``runs - 1`` degrees of freedom, two-sided ``level``): 2.78 at 5 runs at
    the 5% level. A mean beyond two standard errors, the rule before, is lenient with five runs.
    Without ``n_runs`` nor ``z``: 2.
    """
    if z is None:
        z = t_critical(n_runs, level) if n_runs is not None else 2.0
    if sign * mean > z * se:
        return "reproduced"
    if sign * mean < -z * se:
        return "contradicted"
    return "inconclusive"


def holm(pvalues: list[float], level: float = 0.05) -> list[bool]:
    """Holm's step-down correction: which of ``pvalues`` are rejected with the family-wise error rate
    at most ``level``. The ``k``-th smallest p-value (``k = 0, 1, ...``) is compared with
    ``level / (m - k)``; the first that fails stops the rejections."""
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    out = [False] * len(pvalues)
    m = len(pvalues)
    for k, i in enumerate(order):
        if pvalues[i] > level / (m - k):
            break
        out[i] = True
    return out



def rate_verdict(successes: int, n: int, p0: float, level: float = 0.05) -> dict:
    """A claim "the rate exceeds ``p0``" judged on ``successes`` of ``n`` independent trials, in the
    register's words: ``reproduced`` where the exact binomial test puts the rate above ``p0``
    (``P(X >= successes) <= level / 2`` for ``X ~ Binomial(n, p0)``), ``contradicted`` where it puts
    it below (``P(X <= successes) <= level / 2``), ``inconclusive`` otherwise (a sample too small or a
    rate too close to ``p0`` to tell). A check on it passes where reproduced, fails where contradicted
    and is skipped, with the counts, where inconclusive: a small sample does not fail a claim on noise
    (at most ``level / 2`` of samples are contradicted where the rate is ``p0`` or more).

    Returns ``{"rate", "p_above", "p_below", "n", "verdict"}``.
    """
    from scipy import stats

    if not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n, got {successes} of {n}")
    above = float(stats.binom.sf(successes - 1, n, p0)) if n else 1.0
    below = float(stats.binom.cdf(successes, n, p0)) if n else 1.0
    verdict = "reproduced" if above <= level / 2 else "contradicted" if below <= level / 2 else "inconclusive"
    return {"rate": successes / n if n else float("nan"), "p_above": above, "p_below": below, "n": n,
            "verdict": verdict}


def within_bound(value: float, se: float, bound: float, family: int = 1, level: float = 0.05) -> dict:
    """A claim "``|value|`` is at most ``bound``" judged on an estimate with standard error ``se``, in
    the register's words: ``reproduced`` where ``|value| + z se <= bound`` (the whole interval lies
    within the bound), ``contradicted`` where ``|value| - z se > bound`` (it lies beyond), otherwise
    ``inconclusive`` (the estimate is too noisy, or too near the bound, to tell). ``z`` is the normal
    quantile at ``level / 2`` one-sided, Bonferroni-corrected over the ``family`` of estimates the
    claim is judged on together (1.96 for one, 2.24 for two, 2.39 for three at 5%).

    Returns ``{"value", "se", "bound", "z", "verdict"}``.
    """
    from scipy import stats

    if not (se >= 0 and bound >= 0 and family >= 1):
        raise ValueError(f"need se >= 0, bound >= 0 and family >= 1, got se={se}, bound={bound}, "
                         f"family={family}")
    z = float(stats.norm.ppf(1 - level / (2 * family)))
    size = abs(value)
    verdict = ("reproduced" if size + z * se <= bound else "contradicted" if size - z * se > bound
               else "inconclusive")
    return {"value": float(value), "se": float(se), "bound": float(bound), "z": z, "verdict": verdict}


def family_z(m: int, level: float = 1e-3) -> float:
    """How many standard errors a check that compares ``m`` Monte Carlo means with their closed forms
    allows each: the two-sided normal quantile at ``level / m`` (Bonferroni), so that a correct simulation
    fails the whole check with probability at most ``level`` however many entries it compares (4.75 for
    500 entries, 5.20 for 5,000 at the default 0.1%). A fixed allowance fails large comparisons on noise."""
    from scipy import stats

    if m < 1 or not 0 < level < 1:
        raise ValueError(f"need m >= 1 and 0 < level < 1, got m={m}, level={level}")
    return float(stats.norm.isf(level / (2 * m)))


def tost(mean: float, se: float, n_runs: int, margin: float, level: float = 0.05) -> dict:
    """Two one-sided tests that ``|effect| < margin``: against ``effect <= -margin`` with
    ``t = (mean + margin) / se`` and against ``effect >= margin`` with ``t = (margin - mean) / se``, each one-sided
    under Student's t with ``n_runs - 1`` degrees of freedom (normal with one run, as :func:`t_critical`).
    ``p`` is the larger of the two p-values; ``absent`` is ``p <= level``, which is the same as the
    ``1 - 2 level`` interval ``mean +- t_{1-level} se`` (90% at the default) lying inside ``(-margin, margin)``.

    Returns ``{"mean", "se", "margin", "lower", "upper", "p", "absent"}`` (``lower``/``upper``: that interval).
    """
    from scipy import stats

    if not (se >= 0 and margin > 0 and 0 < level < 0.5):
        raise ValueError(f"need se >= 0, margin > 0 and 0 < level < 0.5, got se={se}, margin={margin}, "
                         f"level={level}")
    dist = stats.norm if n_runs < 2 else stats.t(n_runs - 1)
    if se == 0:
        p = 0.0 if abs(mean) < margin else 1.0
    else:
        p = float(max(dist.sf((mean + margin) / se), dist.sf((margin - mean) / se)))
    half = float(dist.ppf(1 - level)) * se
    return {"mean": float(mean), "se": float(se), "margin": float(margin), "lower": float(mean - half),
            "upper": float(mean + half), "p": p, "absent": p <= level}


def seeds_needed(effect: float, sd: float, floor: float, level: float, n_max: int = 1000) -> int | None:
    """The fewest runs ``n`` (2 to ``n_max``) at which an effect of ``effect`` with spread ``sd`` between runs
    would pass the register's test: ``|effect| >= t_{1-level/2, n-1} sqrt(sd^2 / n + floor^2)``, where
    ``floor`` is the binomial bound of the shared test sets (it does not shrink with runs). ``None`` where
    no number of runs up to ``n_max`` suffices; no number at all does where ``|effect| <= z_{1-level/2} floor``
    (:func:`floor_binds`).
    """
    from scipy import stats

    if not (sd >= 0 and floor >= 0 and 0 < level < 1 and n_max >= 2):
        raise ValueError(f"need sd >= 0, floor >= 0, 0 < level < 1 and n_max >= 2, got sd={sd}, floor={floor}, "
                         f"level={level}, n_max={n_max}")
    if floor_binds(effect, floor, level):
        return None
    size = abs(effect)
    lo, hi = 2, n_max                       # the test's left side falls with n: bisect on the first n that passes
    passes = lambda n: size >= float(stats.t.ppf(1 - level / 2, n - 1)) * (sd * sd / n + floor * floor) ** 0.5  # noqa: E731
    if not passes(hi):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if passes(mid) else (mid + 1, hi)
    return lo


def floor_binds(effect: float, floor: float, level: float) -> bool:
    """Can no number of runs decide an effect of ``effect``? True where ``|effect| <= z_{1-level/2} floor``: with
    infinitely many runs the spread between them vanishes and Student's t becomes the normal, but the binomial
    bound ``floor`` of test sets shared by every run stays."""
    from scipy import stats

    return abs(effect) <= float(stats.norm.ppf(1 - level / 2)) * floor
