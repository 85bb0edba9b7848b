"""Wrong versions of the science library behind the closed-form numbers a page shows (issue 96 item 3), one per
mutant of ``tests/mutants.py`` whose entry names ``wc.``: each is caught by a check that compares the shown value
with an independent computation. Same style as ``tests/mutant_wrongs.py``: each takes the original function and
returns its replacement; the comment on the changed line says what is wrong.
"""
from __future__ import annotations

import math

import torch


# ----------------------------------------------------------------------------- Wu et al.'s theorems
def logit_bound_doubled(orig):
    def random_attention_stack(*args, **kwargs):
        attn, bound = orig(*args, **kwargs)
        return attn, 2 * bound                               # B = 2 C^2 / sqrt(d): the logit range, not its half-width
    return random_attention_stack


def logit_bound_halved(orig):
    def random_attention_stack(*args, **kwargs):
        attn, bound = orig(*args, **kwargs)
        return attn, bound / 2                               # B = C^2 / (2 sqrt(d))
    return random_attention_stack


def attention_no_sqrt_d(orig):
    def attention_weights(q, k, mask, bias=None):
        return orig(q * math.sqrt(q.shape[-1]), k, mask, bias)   # logits q k^T, not divided by sqrt(d)
    return attention_weights


def prefix_one_ahead(orig):
    def prefix_mask(n, k):
        i, j = torch.arange(n).unsqueeze(1), torch.arange(n).unsqueeze(0)
        return (j <= i) | ((j < k) & (j <= i + 1))  # a prefix token sees one ahead, not the whole prefix
    return prefix_mask


def stirling_returns_kappa(orig):
    return lambda depth, m: (depth - 1) / math.expm1(m) - 1  # kappa, not the Stirling root kappa + 1


def slowest_angle_one_past(orig):
    return lambda d, base=10000.0: base ** (-d / d)          # pair p = d/2, one past the last: 1/base


def kstar_depth_plus_one(orig):
    return lambda depth, m: orig(depth + 1, m)               # the peak of L + 1 layers


# ----------------------------------------------------------------------------- Kim et al.
def layer2_float32(orig):
    import posbias.science.lnsim as ln

    def layer2_scores(n, d, alpha=0.0, *, layernorm=True, residual=False, finite_d=True, log_weights=None):
        lw = ln.layer1_log_weights(n, d, alpha, layernorm=layernorm, finite_d=finite_d) if log_weights is None \
            else log_weights
        w = torch.softmax(lw.float(), dim=-1)                 # wrong: single precision from here on
        eye = torch.eye(n, dtype=torch.float32)
        if layernorm:
            r = ln.layer1_offdiag_moments(d, alpha)[0] / math.sqrt(d) if finite_d else alpha
            gram = r + (1.0 - r) * eye
            sigma = 1.0 / math.sqrt(d * (1.0 - alpha))
        else:
            gram = ln.alpha_to_l(alpha) ** 2 + eye
            sigma = 1.0
        if residual:
            w = w + sigma * eye
        c = w @ gram @ w.T
        if layernorm:
            dg = torch.sqrt(torch.diagonal(c))
            s = math.sqrt(d) * c / (dg[:, None] * dg[None, :])
        else:
            s = c / math.sqrt(d)
        return s.double().masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("nan"))
    return layer2_scores


def paper_weights_lognormal(orig):
    def layer1_log_weights(n, d, alpha, *, layernorm=True, finite_d=True):
        return orig(n, d, alpha, layernorm=layernorm)         # wrong: finite_d=False ignored, D_j gets e^{v/2}
    return layer1_log_weights


def sketch_linear(orig):
    return lambda n: orig(n) ** 2                              # wrong: cosines j/i instead of sqrt(j/i)


def layer2_rewritten(*, sigma_isotropic=False, gram_alpha=False):
    """layer2_scores rewritten with one line wrong (like layer2_variant above)."""
    import posbias.science.lnsim as ln

    def layer2_scores(n, d, alpha=0.0, *, layernorm=True, residual=False, finite_d=True, log_weights=None):
        lw = ln.layer1_log_weights(n, d, alpha, layernorm=layernorm, finite_d=finite_d) if log_weights is None \
            else log_weights
        w = torch.softmax(lw, dim=-1)
        eye = torch.eye(n, dtype=torch.float64)
        if layernorm:
            r = ln.layer1_offdiag_moments(d, alpha)[0] / math.sqrt(d) if finite_d and not gram_alpha \
                else alpha                                            # wrong (gram_alpha): Fisher term dropped
            gram = r + (1.0 - r) * eye
            sigma = 1.0 / math.sqrt(d) if sigma_isotropic \
                else 1.0 / math.sqrt(d * (1.0 - alpha))               # wrong (sigma_isotropic): 1/sqrt(d)
        else:
            gram = ln.alpha_to_l(alpha) ** 2 + eye
            sigma = 1.0
        if residual:
            w = w + sigma * eye
        c = w @ gram @ w.T
        if layernorm:
            dg = torch.sqrt(torch.diagonal(c))
            s = math.sqrt(d) * c / (dg[:, None] * dg[None, :])
        else:
            s = c / math.sqrt(d)
        return s.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("nan"))
    return layer2_scores


def residual_sigma_isotropic(orig):
    return layer2_rewritten(sigma_isotropic=True)


def gram_without_fisher(orig):
    return layer2_rewritten(gram_alpha=True)


def lognormal_weight_full_var(orig):
    import posbias.science.lnsim as ln

    def layer1_log_weights(n, d, alpha, *, layernorm=True, finite_d=True):
        lw = orig(n, d, alpha, layernorm=layernorm, finite_d=finite_d)
        if layernorm and finite_d:                           # wrong: e^{m + v}, not the log-normal mean e^{m + v/2}
            lw = lw + torch.tril(torch.ones(n, n, dtype=torch.float64), -1) * ln.layer1_offdiag_moments(d, alpha)[1] / 2
        return lw
    return layer1_log_weights


def lognormal_var_unsquared(orig):
    return lambda d, alpha: (orig(d, alpha)[0], 1.0 - alpha**2)   # wrong: (1 - alpha^2), not squared


def noln_variance_no_shared(orig):
    return lambda d, alpha: 1.0 / d**2                  # wrong: the query's shared l u dropped, (1 + l^2) -> 1
