"""The curated mutants: wrong versions of the science library that a theory chapter must catch.

Each entry replaces one function (``target``) for the smoke execution of the chapters listed; the
chapter must then end with at least one failed check (``tests/test_mutations.py``), the same check at the
chapter's own seed and at two others. The first of each
chapter's group are the twelve changes of issue 46; the rest are off-by-one masks, sign flips, dropped
normalisations, swapped layer orders, wrong constants and mechanisms switched off (the rollout's product,
LayerNorm, the residual, the inputs' shared component). ``book/teeth.json`` records which check
kills which mutant; the Status page reads it.
"""
from __future__ import annotations

import math

import torch

from posbias.mutation import Mutant


def _const(value):
    return lambda orig: (lambda *a, **k: value)


# ----------------------------------------------------------------------------- wrong functions
def _rollout_reversed(orig):
    def rollout(attn, residual=False):
        n = attn.shape[-1]
        if residual:
            attn = 0.5 * (attn + torch.eye(n, dtype=attn.dtype))
        out = torch.empty_like(attn)
        p = attn[..., 0, :, :]
        out[..., 0, :, :] = p
        for t in range(1, attn.shape[-3]):
            p = p @ attn[..., t, :, :]                       # A(0) ... A(t): the wrong order
            out[..., t, :, :] = p
        return out
    return rollout


def _rollout_one_layer_late(orig):
    def rollout(attn, residual=False):
        out = orig(attn, residual)
        eye = torch.eye(attn.shape[-1], dtype=attn.dtype).expand_as(out[..., :1, :, :])
        return torch.cat([eye, out[..., :-1, :, :]], dim=-3)   # P(t) = A(t-1) ... A(0)
    return rollout


def _stream_reversed(orig):
    def stream_rollout(layers, cols=None):
        kept, p = [], None
        for a in layers:
            p = a if p is None else p @ a                    # A(0) ... A(t)
            kept.append(p if cols is None else p[..., cols])
        return torch.stack(kept, dim=-3), p
    return stream_rollout


def _stream_drops_first(orig):
    def stream_rollout(layers, cols=None):
        it = iter(layers)
        first = next(it)
        p = torch.eye(first.shape[-1], dtype=first.dtype).expand_as(first).clone()
        kept = []
        for a in [first, *it]:
            kept.append(p if cols is None else p[..., cols])  # one layer late
            p = a @ p
        return torch.stack(kept, dim=-3), p
    return stream_rollout


def _causal_upper(orig):
    return lambda n: torch.triu(torch.ones(n, n, dtype=torch.bool))


def _window_wider(orig):
    def sliding_window_mask(n, w):
        i, j = torch.arange(n).unsqueeze(1), torch.arange(n).unsqueeze(0)
        return (j <= i) & (j >= i - w)                       # w + 1 positions
    return sliding_window_mask


def _window_narrower(orig):
    def sliding_window_mask(n, w):
        i, j = torch.arange(n).unsqueeze(1), torch.arange(n).unsqueeze(0)
        return (j <= i) & (j > i - w + 1)                    # w - 1 positions
    return sliding_window_mask


def _window_hops_floor(orig):
    return lambda n, w: (n - 1) // (w - 1)


def _prefix_wider(orig):
    def prefix_mask(n, k):
        i, j = torch.arange(n).unsqueeze(1), torch.arange(n).unsqueeze(0)
        return (j <= i) | (j <= k)                           # k + 1 prefix tokens
    return prefix_mask


def _center_any(orig):
    from posbias.masks import reachability

    return lambda mask: [int(j) for j in torch.nonzero(reachability(mask).any(dim=0)).flatten()]


def _hop_plus_one(orig):
    def hop_distance(mask, target=0):
        d = orig(mask, target)
        return torch.where(d > 0, d + 1, d)
    return hop_distance


def _softmax_unnormalised(orig):
    def masked_softmax(logits, mask):
        z = logits.masked_fill(~mask, torch.finfo(logits.dtype).min)
        e = torch.exp(z - z.amax(dim=-1, keepdim=True)) * mask
        return e / mask.sum(dim=-1, keepdim=True)            # divided by the count, not the sum
    return masked_softmax


def _softmax_ignores_mask(orig):
    return lambda logits, mask: orig(logits, torch.ones_like(mask))


def _decay_bias_half(orig):
    return lambda n, m, dtype=torch.float64: orig(n, m / 2, dtype)


def _kappa_no_minus_one(orig):
    def decay_critical_distance(depth, m):
        kappa = (depth - 1) / math.expm1(m)                  # the "- 1" dropped
        return max(0, math.ceil(kappa - 1e-12))
    return decay_critical_distance


def _stirling_exp(orig):
    return lambda depth, m: (depth - 1) / math.exp(m)


def _path_count_shift(orig):
    def log_path_count(k, depth):
        k = torch.as_tensor(k, dtype=torch.float64)
        return torch.lgamma(k + depth + 1) - torch.lgamma(k + 1) - math.lgamma(depth + 1)  # C(k+L, k)
    return log_path_count


def _band_j(orig):
    def decay_band(depth, m, j, logit_bound=0.0):
        j = torch.as_tensor(j, dtype=torch.float64)
        lo = torch.full_like(j, -2.0 * logit_bound * depth)
        hi = 2.0 * logit_bound * depth - depth * torch.log(-torch.expm1(-m * (j + 2)))  # j + 2
        return lo, hi
    return decay_band


def _slopes_fl5(orig):
    def rope_critical_slopes(k, depth, theta, c):
        f_k = 1 / (k + depth - 1) - 1 / k - c * theta**2 * math.cos(k * theta)
        f_l = 5 / (k + depth - 1)                            # f_L times 5
        f_t = -c * (math.sin(k * theta) + k * theta * math.cos(k * theta))
        return -f_l / f_k, -f_t / f_k
    return rope_critical_slopes


def _rope_sum_one_short(orig):
    return lambda n, depth, theta, beta: orig(n, max(1, depth - 1), theta, beta)


def _rope_rotation_sign(orig):
    def apply_rope(x, angles):
        cos, sin = torch.cos(angles).to(x.dtype), torch.sin(angles).to(x.dtype)
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack((x1 * cos + x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)  # not a rotation
    return apply_rope


def _rope_stirling_theta2(orig):
    return lambda depth, theta, c: orig(depth, theta, c * theta)


def _half_rope_no_ln2(orig):
    def half_weight_distance_rope(theta, beta):
        x = 1 - 1 / beta                                     # ln 2 dropped
        return math.inf if x < -1 else math.acos(x) / theta
    return half_weight_distance_rope


def _is_closed_inverted(orig):
    return lambda mask, nodes: not orig(mask, nodes)


# Kim et al.
def _lognormal_var0(orig):
    return lambda d, alpha: (orig(d, alpha)[0], 0.0)


def _fisher_sign(orig):
    def layer1_offdiag_moments(d, alpha):
        return math.sqrt(d) * alpha * (1.0 + (1.0 - alpha**2) / (2 * d)), (1.0 - alpha**2) ** 2
    return layer1_offdiag_moments


def _residual_sigma1(orig):
    return _layer2_variant(sigma_one=True)


def _gram_plus_identity(orig):
    return _layer2_variant(gram_plus_eye=True)


def _layer2_variant(sigma_one=False, gram_plus_eye=False):
    import posbias.lnsim as ln

    def layer2_scores(n, d, alpha=0.0, *, layernorm=True, residual=False, finite_d=True, log_weights=None):
        lw = ln.layer1_log_weights(n, d, alpha, layernorm=layernorm, finite_d=finite_d) if log_weights is None \
            else log_weights
        w = torch.softmax(lw, dim=-1)
        eye = torch.eye(n, dtype=torch.float64)
        if layernorm:
            r = ln.layer1_offdiag_moments(d, alpha)[0] / math.sqrt(d) if finite_d else alpha
            gram = r + (1.0 - (0.0 if gram_plus_eye else r)) * eye      # wrong: r + I
            sigma = 1.0 if sigma_one else 1.0 / math.sqrt(d * (1.0 - alpha))  # wrong: sigma = 1
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


def _layer2_transposed(orig):
    def layer2_scores(n, d, alpha=0.0, **kw):
        s = orig(n, d, alpha, **kw)
        i, j = torch.tril_indices(n, n, -1)
        out = s.clone()
        # each row's off-diagonal scores in reverse key order: recency turned into primacy
        for r in range(1, n):
            out[r, :r] = s[r, :r].flip(0)
        return out
    return layer2_scores


def _slope_factor_one(orig):
    return lambda d: 1.0


def _slope_factor_sign(orig):
    return lambda d: 1.0 - 1.0 / math.sqrt(d) + 2.0 / d


def _uniform_layer1(orig):
    def noln_mean_field(n, d, alpha=0.0, depth=4, *, residual=False, decay=None):
        from posbias.masks import causal_mask
        mask = causal_mask(n)
        l2 = alpha / (1 - alpha)
        c = l2 + torch.eye(n, dtype=torch.float64)
        out = torch.empty(depth, n, n, dtype=torch.float64)
        for t in range(depth):
            s = c / math.sqrt(d)
            out[t] = s.masked_fill(~mask, float("nan"))
            w = mask.double() / mask.double().sum(-1, keepdim=True)   # uniform weights, scores ignored
            if residual:
                w = w + torch.eye(n, dtype=torch.float64)
            c = w @ c @ w.T
        return out
    return noln_mean_field


def _mean_field_sqrt_d(orig):
    def noln_mean_field(n, d, alpha=0.0, depth=4, *, residual=False, decay=None):
        return orig(n, 1.0 / d, alpha, depth, residual=residual, decay=decay) / d   # C sqrt(d) / d
    return noln_mean_field


def _mean_field_no_update(orig):
    def noln_mean_field(n, d, alpha=0.0, depth=4, *, residual=False, decay=None):
        one = orig(n, d, alpha, 1, residual=residual, decay=decay)
        return one.expand(depth, n, n).clone()               # layer 1's Gram matrix at every layer
    return noln_mean_field


def _stack_residual_h(orig):
    import posbias.lnsim as ln

    def stack_forward(x, depth, *, layernorm=True, residual=False, rope_base=None, decay=None):
        s, n, d = x.shape
        mask = ln.causal_mask(n)
        scores = torch.empty(s, depth, n, n, dtype=x.dtype)
        attn = torch.empty(s, depth, n, n, dtype=x.dtype)
        bias = ln.decay_bias(n, decay, dtype=x.dtype) if decay else None
        angles = ln.rope_angles(n, d, rope_base, dtype=x.dtype) if rope_base is not None else None
        for t in range(depth):
            h = ln.layer_norm(x) if layernorm else x
            qk = ln.apply_rope(h, angles) if angles is not None else h
            logits = qk @ qk.transpose(-1, -2) / math.sqrt(d)
            if bias is not None:
                logits = logits + bias
            a = ln.masked_softmax(logits, mask)
            scores[:, t] = logits.masked_fill(~mask, float("nan"))
            attn[:, t] = a
            x = a @ h + (h if residual else 0.0)             # residual adds LN(x), not x
        return scores, attn
    return stack_forward


def _alpha_to_l_sqrt(orig):
    return lambda alpha: math.sqrt(alpha)


def _rp_reversed(orig):
    return lambda scores: 1.0 - orig(scores)


def _rope_layer1_sin(orig):
    from posbias.attention import rope_angles

    def rope_layer1_scores(n, d, alpha, base=10000.0):
        ang = rope_angles(n, d, base)
        rel = torch.sin(ang[:, None, :] - ang[None, :, :]).abs().mean(-1)   # sin for cos
        s = alpha * math.sqrt(d) * rel
        s.fill_diagonal_(math.sqrt(d))
        return s.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("nan"))
    return rope_layer1_scores


def _expansion_no_var(orig):
    def expansion_parameter(n, d, alpha):
        import posbias.lnsim as ln
        m, _ = ln.layer1_offdiag_moments(d, alpha)
        return (n - 1) * math.exp(m - math.sqrt(d))
    return expansion_parameter


def _mean_field_decay_sign(orig):
    def noln_mean_field(n, d, alpha=0.0, depth=4, *, residual=False, decay=None):
        return orig(n, d, alpha, depth, residual=residual, decay=decay / 2 if decay else decay)
    return noln_mean_field


def _rope_angles_base(orig):
    return lambda n, d, base=10000.0, dtype=torch.float64: orig(n, d, base / 10, dtype)


def _decay_peaks_unflipped(orig):
    def decay_peaks(n, m_grid, depth_grid):
        rows, skipped = orig(n, m_grid, depth_grid)
        return [{**r, "k_hat": n - 1 - r["k_hat"]} for r in rows], skipped   # argmax of the row as stored
    return decay_peaks


def _rope_rollout_unnormalised(orig):
    def rope_rollout_row_log(n, depths, theta, beta):
        from posbias.theory import _log_convolve

        k = torch.arange(n, dtype=torch.float64)
        logw = beta * torch.cos(k * theta)
        w = torch.exp(logw - beta)
        logv, out = logw.clone(), {}
        for depth in range(1, max(depths) + 1):
            if depth > 1:
                logv = _log_convolve(logv, w) + beta         # no division by each row's Z_i
            out[depth] = logv
        return torch.stack([out[depth] for depth in depths])
    return rope_rollout_row_log


def _rope_path_sum_reversed(orig):
    return lambda n, depth, theta, beta: orig(n, depth, theta, beta).flip(0)


def _slowest_angle_second_pair(orig):
    return lambda d, base=10000.0: base ** (-2 / d)


def _window_ignored(orig):
    from posbias.masks import causal_mask

    return lambda n, w: causal_mask(n)                      # the window dropped: plain causal


def _center_reversed(orig):
    from posbias.masks import reachability

    return lambda mask: [int(j) for j in torch.nonzero(reachability(mask).all(dim=1)).flatten()]


def _full_lower(orig):
    from posbias.masks import causal_mask

    return causal_mask                                      # "full" built lower-triangular


# ----------------------------------------------------------------------------- mechanisms switched off
def _rollout_no_product(orig):
    def rollout(attn, residual=False):
        n = attn.shape[-1]
        return 0.5 * (attn + torch.eye(n, dtype=attn.dtype)) if residual else attn.clone()  # P(t) = A(t)
    return rollout


def _stream_no_product(orig):
    def stream_rollout(layers, cols=None):
        kept, a = [], None
        for a in layers:
            kept.append(a if cols is None else a[..., cols])  # each layer's own weights, never multiplied
        return torch.stack(kept, dim=-3), a
    return stream_rollout


def _layernorm_forced(orig):
    return lambda x, depth, **kw: orig(x, depth, **{**kw, "layernorm": True})


def _decay_forced(orig):
    return lambda x, depth, **kw: orig(x, depth, **{**kw, "decay": kw.get("decay") or 0.5})


def _slope_reversed(orig):
    return lambda n: -orig(n)


def _residual_dropped(orig):
    return lambda x, depth, **kw: orig(x, depth, **{**kw, "residual": False})


def _layernorm_identity(orig):
    return lambda x, eps=None: x


def _layernorm_token_axis(orig):
    from posbias.lnsim import LN_EPS

    def layer_norm(x, eps=LN_EPS):
        mean, var = x.mean(-2, keepdim=True), x.var(-2, unbiased=False, keepdim=True)
        return (x - mean) / torch.sqrt(var + eps)               # over the tokens, not the features
    return layer_norm


def _inputs_isotropic(orig):
    return lambda sims, n, d, alpha, generator: orig(sims, n, d, 0.0, generator)  # alpha ignored


# ----------------------------------------------------------------------------- the catalogue
T, M, R, A, L = "posbias.theory", "posbias.masks", "posbias.rollout", "posbias.attention", "posbias.lnsim"

MUTANTS: list[Mutant] = [
    # wu-thm-4-1
    Mutant("rollout-reversed", f"{R}.rollout", "reversed product order in rollout: A(0) ... A(t)",
           _rollout_reversed, ("wu-thm-4-1",)),
    Mutant("causal-upper", f"{M}.causal_mask", "causal mask flipped to upper triangular", _causal_upper,
           ("wu-thm-4-1",)),
    Mutant("rollout-one-layer-late", f"{R}.rollout", "P(t) built from t layers instead of t + 1",
           _rollout_one_layer_late, ("wu-thm-4-1",)),
    Mutant("softmax-unnormalised", f"{A}.masked_softmax", "softmax divided by the number of allowed entries, "
           "not by the sum of the weights", _softmax_unnormalised, ("wu-thm-4-1",)),
    Mutant("rollout-no-product", f"{R}.rollout", "rollout returns each layer's own weights: P(t) = A(t)",
           _rollout_no_product, ("wu-thm-4-1",)),
    # wu-thm-4-2
    Mutant("window-wider", f"{M}.sliding_window_mask", "sliding window j >= i - w (one wider)", _window_wider,
           ("wu-thm-4-2",)),
    Mutant("window-narrower", f"{M}.sliding_window_mask", "sliding window j > i - w + 1 (one narrower)",
           _window_narrower, ("wu-thm-4-2",)),
    Mutant("window-hops-floor", f"{M}.window_hops", "hop count floor((N-1)/(w-1)) instead of the ceiling",
           _window_hops_floor, ("wu-thm-4-2",)),
    Mutant("hop-distance-plus-one", f"{M}.hop_distance", "hop distance one too large", _hop_plus_one,
           ("wu-thm-4-2",)),
    Mutant("window-ignored", f"{M}.sliding_window_mask", "the window dropped: a plain causal mask", _window_ignored,
           ("wu-thm-4-2",)),
    Mutant("stream-no-product", f"{R}.stream_rollout", "stream_rollout keeps each layer's own weights, "
           "never their product", _stream_no_product, ("wu-thm-4-2",)),
    # wu-thm-4-3
    Mutant("stream-reversed", f"{R}.stream_rollout", "reversed product order in stream_rollout",
           _stream_reversed, ("wu-thm-4-3",)),
    Mutant("prefix-wider", f"{M}.prefix_mask", "prefix mask j <= K (one prefix token too many)", _prefix_wider,
           ("wu-thm-4-3",)),
    Mutant("stream-one-layer-late", f"{R}.stream_rollout", "stream_rollout keeps P one layer late",
           _stream_drops_first, ("wu-thm-4-3",)),
    Mutant("softmax-ignores-mask", f"{A}.masked_softmax", "softmax over every position, the mask ignored",
           _softmax_ignores_mask, ("wu-thm-4-3",)),
    # wu-thm-4-5
    Mutant("kappa-no-minus-one", f"{T}.decay_critical_distance", "kappa = (L-1)/(e^m-1) without the - 1",
           _kappa_no_minus_one, ("wu-thm-4-5",)),
    Mutant("decay-bias-half", f"{A}.decay_bias", "decay bias -m (i-j) / 2 (wrong constant)", _decay_bias_half,
           ("wu-thm-4-5",)),
    Mutant("path-count-shift", f"{T}.log_path_count", "C(k+L, k) instead of C(k+L-1, k)", _path_count_shift,
           ("wu-thm-4-5",)),
    Mutant("stirling-exp", f"{T}.decay_critical_distance_stirling", "Stirling peak (L-1)/e^m instead of "
           "(L-1)/(e^m - 1)", _stirling_exp, ("wu-thm-4-5",)),
    Mutant("band-j-plus-two", f"{T}.decay_band", "upper band with 1 - gamma^(j+2)", _band_j, ("wu-thm-4-5",)),
    Mutant("decay-peaks-unflipped", f"{T}.decay_peaks", "peak read from the first token: the row not flipped",
           _decay_peaks_unflipped, ("wu-thm-4-5",)),
    # wu-thm-4-7
    Mutant("slopes-fl-times-5", f"{T}.rope_critical_slopes", "f_L times 5 in the implicit derivative",
           _slopes_fl5, ("wu-thm-4-7",)),
    Mutant("rope-path-sum-short", f"{T}.rope_path_sum_log", "path sum over L - 1 layers", _rope_sum_one_short,
           ("wu-thm-4-7",)),
    Mutant("rope-not-rotation", f"{A}.apply_rope", "RoPE with a sign error: not a rotation", _rope_rotation_sign,
           ("wu-thm-4-7",)),
    Mutant("rope-stirling-c-theta", f"{T}.rope_critical_distance_stirling", "Stirling root with c theta for c",
           _rope_stirling_theta2, ("wu-thm-4-7",)),
    Mutant("half-rope-no-ln2", f"{T}.half_weight_distance_rope", "half-weight distance without ln 2",
           _half_rope_no_ln2, ("wu-thm-4-7",)),
    Mutant("rope-rollout-unnormalised", f"{T}.rope_rollout_row_log", "P = A^L without dividing each row by its Z",
           _rope_rollout_unnormalised, ("wu-thm-4-7",)),
    Mutant("rope-path-sum-reversed", f"{T}.rope_path_sum_log", "path sum indexed from the first token",
           _rope_path_sum_reversed, ("wu-thm-4-7",)),
    Mutant("slowest-angle-second-pair", f"{T}.rope_slowest_angle", "slowest angle base^(-2/d): the second pair's",
           _slowest_angle_second_pair, ("wu-thm-4-7",)),
    # wu-center-nodes
    Mutant("center-any", f"{M}.center_nodes", "center nodes reachable from SOME token instead of every token",
           _center_any, ("wu-center-nodes",)),
    Mutant("is-closed-inverted", f"{M}.is_closed", "is_closed answers the opposite", _is_closed_inverted,
           ("wu-center-nodes",)),
    Mutant("center-stream-reversed", f"{R}.stream_rollout", "reversed product order in stream_rollout",
           _stream_reversed, ("wu-center-nodes",)),
    Mutant("center-prefix-wider", f"{M}.prefix_mask", "prefix mask j <= K", _prefix_wider, ("wu-center-nodes",)),
    Mutant("center-reversed", f"{M}.center_nodes", "center nodes: the tokens that reach every token",
           _center_reversed, ("wu-center-nodes", "wu-thm-4-2")),
    Mutant("full-lower", f"{M}.full_mask", "the full mask built lower-triangular", _full_lower,
           ("wu-center-nodes",)),
    # kim-thm-1
    Mutant("slope-factor-one", f"{L}.alpha0_slope_factor", "next-order factor set to 1", _slope_factor_one,
           ("kim-thm-1",)),
    Mutant("slope-factor-sign", f"{L}.alpha0_slope_factor", "next-order factor 1 - 1/sqrt(d) + 2/d",
           _slope_factor_sign, ("kim-thm-1",)),
    Mutant("thm1-primacy", f"{L}.layer2_scores", "layer-2 closed form with the key order reversed",
           _layer2_transposed, ("kim-thm-1",)),
    Mutant("thm1-lognormal-var0", f"{L}.layer1_offdiag_moments", "log-normal variance set to 0",
           _lognormal_var0, ("kim-thm-1",)),
    Mutant("slope-reversed", "posbias.lntheory.slope_contrast", "within-row slope taken against the reversed key "
           "order (its sign flipped), in the simulations and the closed forms alike", _slope_reversed,
           ("kim-thm-1", "kim-prop-1", "kim-prop-3"), fresh=True),
    Mutant("layernorm-identity", f"{L}.layer_norm", "LayerNorm that returns its input", _layernorm_identity,
           ("kim-thm-1", "kim-prop-2", "kim-prop-3", "kim-fig-1", "kim-fig-2"), fresh=True),
    Mutant("layernorm-token-axis", f"{L}.layer_norm", "LayerNorm over the token axis instead of the features",
           _layernorm_token_axis, ("kim-thm-1", "kim-prop-2", "kim-prop-3", "kim-fig-1"), fresh=True),
    # kim-prop-1
    Mutant("uniform-layer1", f"{L}.noln_mean_field", "uniform layer-1 weights in Prop 1's mean field",
           _uniform_layer1, ("kim-prop-1",)),
    Mutant("mean-field-sqrt-d", f"{L}.noln_mean_field", "mean-field scores C sqrt(d) / d", _mean_field_sqrt_d,
           ("kim-prop-1",)),
    Mutant("mean-field-no-update", f"{L}.noln_mean_field", "mean field that never updates its Gram matrix",
           _mean_field_no_update, ("kim-prop-1",)),
    Mutant("layernorm-forced", f"{L}.stack_forward", "the stack normalises even when asked not to "
           "(layernorm=False ignored)", _layernorm_forced, ("kim-prop-1", "kim-beyond-rope"), fresh=True),
    Mutant("decay-forced", f"{L}.stack_forward", "the stack adds the recency bias -0.5 (i - j) to every layer's "
           "scores when asked for none", _decay_forced, ("kim-prop-1",), fresh=True),
    # kim-prop-2
    Mutant("residual-sigma-one", f"{L}.layer2_scores", "residual sigma 1 instead of 1/sqrt(d (1 - alpha))",
           _residual_sigma1, ("kim-prop-2",)),
    Mutant("fisher-sign", f"{L}.layer1_offdiag_moments", "Fisher correction with the wrong sign", _fisher_sign,
           ("kim-prop-2",)),
    Mutant("residual-adds-h", f"{L}.stack_forward", "the residual adds LN(x) instead of x", _stack_residual_h,
           ("kim-prop-2",), fresh=True),
    # kim-prop-3
    Mutant("lognormal-var0", f"{L}.layer1_offdiag_moments", "log-normal variance set to 0 (the paper's weights)",
           _lognormal_var0, ("kim-prop-3", "kim-fig-2")),
    Mutant("residual-dropped", f"{L}.stack_forward", "the stack drops the residual (residual=True ignored)",
           _residual_dropped, ("kim-prop-2",), fresh=True),
    Mutant("alpha-to-l-sqrt", f"{L}.alpha_to_l", "l = sqrt(alpha) instead of sqrt(alpha / (1 - alpha))",
           _alpha_to_l_sqrt, ("kim-prop-3",), fresh=True),
    Mutant("prop3-primacy", f"{L}.layer2_scores", "layer-2 closed form with the key order reversed",
           _layer2_transposed, ("kim-prop-3",)),
    Mutant("inputs-isotropic", f"{L}.sample_inputs", "inputs drawn without the shared component (alpha "
           "ignored)", _inputs_isotropic, ("kim-prop-3", "kim-fig-1"), fresh=True),
    # kim-fig-1
    Mutant("rp-reversed", f"{L}.recency_probability", "recency probability counts early-token preference",
           _rp_reversed, ("kim-fig-1",)),
    Mutant("fig1-uniform-layer1", f"{L}.noln_mean_field", "uniform layer-1 weights in the mean field",
           _uniform_layer1, ("kim-fig-1",)),
    Mutant("fig1-residual-sigma-one", f"{L}.layer2_scores", "residual sigma 1", _residual_sigma1, ("kim-fig-1",)),
    Mutant("gram-plus-identity", f"{L}.layer2_scores", "layer-2 closed form with the Gram matrix r + I "
           "instead of r + (1 - r) I", _gram_plus_identity, ("kim-fig-1",)),
    # kim-fig-2
    Mutant("fig2-fisher-sign", f"{L}.layer1_offdiag_moments", "Fisher correction with the wrong sign",
           _fisher_sign, ("kim-fig-2",)),
    Mutant("fig2-residual-sigma-one", f"{L}.layer2_scores", "residual sigma 1", _residual_sigma1, ("kim-fig-2",)),
    # kim-beyond-rope
    Mutant("rope-layer1-sin", f"{L}.rope_layer1_scores", "RoPE layer-1 closed form with |sin| for cos",
           _rope_layer1_sin, ("kim-beyond-rope",)),
    Mutant("expansion-no-var", f"{L}.expansion_parameter", "expansion parameter without the log-normal term",
           _expansion_no_var, ("kim-beyond-rope",)),
    Mutant("mean-field-decay-half", f"{L}.noln_mean_field", "mean field with half the decay rate",
           _mean_field_decay_sign, ("kim-beyond-rope",)),
    Mutant("rope-base-tenth", f"{A}.rope_angles", "RoPE angles with a tenth of the base", _rope_angles_base,
           ("kim-beyond-rope",)),
]

BY_ID = {m.id: m for m in MUTANTS}
assert len(BY_ID) == len(MUTANTS), "mutant ids must be unique"
