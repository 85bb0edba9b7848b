"""Wrong versions of the science library's functions, one per mutant of ``tests/mutants.py``.

Each takes the original function and returns its replacement (a wrapper that changes its result, or a
rewrite with one line wrong); the comment on the changed line says what is wrong.
"""
from __future__ import annotations

import math

import torch

# ----------------------------------------------------------------------------- wrong functions
def rollout_reversed(orig):
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


def rollout_one_layer_late(orig):
    def rollout(attn, residual=False):
        out = orig(attn, residual)
        eye = torch.eye(attn.shape[-1], dtype=attn.dtype).expand_as(out[..., :1, :, :])
        return torch.cat([eye, out[..., :-1, :, :]], dim=-3)   # P(t) = A(t-1) ... A(0)
    return rollout


def stream_reversed(orig):
    def stream_rollout(layers, cols=None):
        kept, p = [], None
        for a in layers:
            p = a if p is None else p @ a                    # A(0) ... A(t)
            kept.append(p if cols is None else p[..., cols])
        return torch.stack(kept, dim=-3), p
    return stream_rollout


def stream_drops_first(orig):
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


def causal_upper(orig):
    return lambda n: torch.triu(torch.ones(n, n, dtype=torch.bool))


def window_wider(orig):
    def sliding_window_mask(n, w):
        i, j = torch.arange(n).unsqueeze(1), torch.arange(n).unsqueeze(0)
        return (j <= i) & (j >= i - w)                       # w + 1 positions
    return sliding_window_mask


def window_narrower(orig):
    def sliding_window_mask(n, w):
        i, j = torch.arange(n).unsqueeze(1), torch.arange(n).unsqueeze(0)
        return (j <= i) & (j > i - w + 1)                    # w - 1 positions
    return sliding_window_mask


def window_hops_floor(orig):
    return lambda n, w: (n - 1) // (w - 1)


def prefix_wider(orig):
    def prefix_mask(n, k):
        i, j = torch.arange(n).unsqueeze(1), torch.arange(n).unsqueeze(0)
        return (j <= i) | (j <= k)                           # k + 1 prefix tokens
    return prefix_mask


def center_any(orig):
    from posbias.science.masks import reachability

    return lambda mask: [int(j) for j in torch.nonzero(reachability(mask).any(dim=0)).flatten()]


def hop_plus_one(orig):
    def hop_distance(mask, target=0):
        d = orig(mask, target)
        return torch.where(d > 0, d + 1, d)
    return hop_distance


def softmax_unnormalised(orig):
    def masked_softmax(logits, mask):
        z = logits.masked_fill(~mask, torch.finfo(logits.dtype).min)
        e = torch.exp(z - z.amax(dim=-1, keepdim=True)) * mask
        return e / mask.sum(dim=-1, keepdim=True)            # divided by the count, not the sum
    return masked_softmax


def softmax_ignores_mask(orig):
    return lambda logits, mask: orig(logits, torch.ones_like(mask))


def decay_bias_half(orig):
    return lambda n, m, dtype=torch.float64: orig(n, m / 2, dtype)


def kappa_no_minus_one(orig):
    def decay_critical_distance(depth, m):
        kappa = (depth - 1) / math.expm1(m)                  # the "- 1" dropped
        return max(0, math.ceil(kappa - 1e-12))
    return decay_critical_distance


def stirling_exp(orig):
    return lambda depth, m: (depth - 1) / math.exp(m)


def path_count_shift(orig):
    def log_path_count(k, depth):
        k = torch.as_tensor(k, dtype=torch.float64)
        return torch.lgamma(k + depth + 1) - torch.lgamma(k + 1) - math.lgamma(depth + 1)  # C(k+L, k)
    return log_path_count


def band_j(orig):
    def decay_band(depth, m, j, logit_bound=0.0):
        j = torch.as_tensor(j, dtype=torch.float64)
        lo = torch.full_like(j, -2.0 * logit_bound * depth)
        hi = 2.0 * logit_bound * depth - depth * torch.log(-torch.expm1(-m * (j + 2)))  # j + 2
        return lo, hi
    return decay_band


def slopes_fl5(orig):
    def rope_critical_slopes(k, depth, theta, c):
        f_k = 1 / (k + depth - 1) - 1 / k - c * theta**2 * math.cos(k * theta)
        f_l = 5 / (k + depth - 1)                            # f_L times 5
        f_t = -c * (math.sin(k * theta) + k * theta * math.cos(k * theta))
        return -f_l / f_k, -f_t / f_k
    return rope_critical_slopes


def rope_sum_one_short(orig):
    return lambda n, depth, theta, beta: orig(n, max(1, depth - 1), theta, beta)


def rope_rotation_sign(orig):
    def apply_rope(x, angles):
        cos, sin = torch.cos(angles).to(x.dtype), torch.sin(angles).to(x.dtype)
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack((x1 * cos + x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)  # not a rotation
    return apply_rope


def rope_stirling_theta2(orig):
    return lambda depth, theta, c: orig(depth, theta, c * theta)


def half_rope_no_ln2(orig):
    def half_weight_distance_rope(theta, beta):
        x = 1 - 1 / beta                                     # ln 2 dropped
        return math.inf if x < -1 else math.acos(x) / theta
    return half_weight_distance_rope


def is_closed_inverted(orig):
    return lambda mask, nodes: not orig(mask, nodes)


# Kim et al.
def lognormal_var0(orig):
    return lambda d, alpha: (orig(d, alpha)[0], 0.0)


def fisher_sign(orig):
    def layer1_offdiag_moments(d, alpha):
        return math.sqrt(d) * alpha * (1.0 + (1.0 - alpha**2) / (2 * d)), (1.0 - alpha**2) ** 2
    return layer1_offdiag_moments


def residual_sigma1(orig):
    return layer2_variant(sigma_one=True)


def gram_plus_identity(orig):
    return layer2_variant(gram_plus_eye=True)


def layer2_variant(sigma_one=False, gram_plus_eye=False):
    import posbias.science.lnsim as ln

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


def layer2_transposed(orig):
    def layer2_scores(n, d, alpha=0.0, **kw):
        s = orig(n, d, alpha, **kw)
        i, j = torch.tril_indices(n, n, -1)
        out = s.clone()
        # each row's off-diagonal scores in reverse key order: recency turned into primacy
        for r in range(1, n):
            out[r, :r] = s[r, :r].flip(0)
        return out
    return layer2_scores


def slope_factor_one(orig):
    return lambda d: 1.0


def slope_factor_sign(orig):
    return lambda d: 1.0 - 1.0 / math.sqrt(d) + 2.0 / d


def uniform_layer1(orig):
    def noln_mean_field(n, d, alpha=0.0, depth=4, *, residual=False, decay=None):
        from posbias.science.masks import causal_mask
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


def mean_field_sqrt_d(orig):
    def noln_mean_field(n, d, alpha=0.0, depth=4, *, residual=False, decay=None):
        return orig(n, 1.0 / d, alpha, depth, residual=residual, decay=decay) / d   # C sqrt(d) / d
    return noln_mean_field


def mean_field_no_update(orig):
    def noln_mean_field(n, d, alpha=0.0, depth=4, *, residual=False, decay=None):
        one = orig(n, d, alpha, 1, residual=residual, decay=decay)
        return one.expand(depth, n, n).clone()               # layer 1's Gram matrix at every layer
    return noln_mean_field


def stack_residual_h(orig):
    import posbias.science.lnsim as ln

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


def alpha_to_l_sqrt(orig):
    return lambda alpha: math.sqrt(alpha)


def rp_reversed(orig):
    return lambda scores: 1.0 - orig(scores)


def rope_layer1_sin(orig):
    from posbias.science.attention import rope_angles

    def rope_layer1_scores(n, d, alpha, base=10000.0):
        ang = rope_angles(n, d, base)
        rel = torch.sin(ang[:, None, :] - ang[None, :, :]).abs().mean(-1)   # sin for cos
        s = alpha * math.sqrt(d) * rel
        s.fill_diagonal_(math.sqrt(d))
        return s.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("nan"))
    return rope_layer1_scores


def expansion_no_var(orig):
    def expansion_parameter(n, d, alpha):
        import posbias.science.lnsim as ln
        m, _ = ln.layer1_offdiag_moments(d, alpha)
        return (n - 1) * math.exp(m - math.sqrt(d))
    return expansion_parameter


def mean_field_decay_sign(orig):
    def noln_mean_field(n, d, alpha=0.0, depth=4, *, residual=False, decay=None):
        return orig(n, d, alpha, depth, residual=residual, decay=decay / 2 if decay else decay)
    return noln_mean_field


def rope_angles_base(orig):
    return lambda n, d, base=10000.0, dtype=torch.float64: orig(n, d, base / 10, dtype)


def decay_peaks_unflipped(orig):
    def decay_peaks(n, m_grid, depth_grid):
        rows, skipped = orig(n, m_grid, depth_grid)
        return [{**r, "k_hat": n - 1 - r["k_hat"]} for r in rows], skipped   # argmax of the row as stored
    return decay_peaks


def rope_rollout_unnormalised(orig):
    def rope_rollout_row_log(n, depths, theta, beta):
        from posbias.science.theory import _log_convolve

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


def rope_path_sum_reversed(orig):
    return lambda n, depth, theta, beta: orig(n, depth, theta, beta).flip(0)


def slowest_angle_second_pair(orig):
    return lambda d, base=10000.0: base ** (-2 / d)


def window_ignored(orig):
    from posbias.science.masks import causal_mask

    return lambda n, w: causal_mask(n)                      # the window dropped: plain causal


def center_reversed(orig):
    from posbias.science.masks import reachability

    return lambda mask: [int(j) for j in torch.nonzero(reachability(mask).all(dim=1)).flatten()]


def full_lower(orig):
    from posbias.science.masks import causal_mask

    return causal_mask                                      # "full" built lower-triangular


# ----------------------------------------------------------------------------- mechanisms switched off
def rollout_no_product(orig):
    def rollout(attn, residual=False):
        n = attn.shape[-1]
        return 0.5 * (attn + torch.eye(n, dtype=attn.dtype)) if residual else attn.clone()  # P(t) = A(t)
    return rollout


def stream_no_product(orig):
    def stream_rollout(layers, cols=None):
        kept, a = [], None
        for a in layers:
            kept.append(a if cols is None else a[..., cols])  # each layer's own weights, never multiplied
        return torch.stack(kept, dim=-3), a
    return stream_rollout


def layernorm_forced(orig):
    return lambda x, depth, **kw: orig(x, depth, **{**kw, "layernorm": True})


def decay_forced(orig):
    return lambda x, depth, **kw: orig(x, depth, **{**kw, "decay": kw.get("decay") or 0.5})


def slope_reversed(orig):
    return lambda n: -orig(n)


def residual_dropped(orig):
    return lambda x, depth, **kw: orig(x, depth, **{**kw, "residual": False})


def layernorm_identity(orig):
    return lambda x, eps=None: x


def layernorm_token_axis(orig):
    from posbias.science.lnsim import LN_EPS

    def layer_norm(x, eps=LN_EPS):
        mean, var = x.mean(-2, keepdim=True), x.var(-2, unbiased=False, keepdim=True)
        return (x - mean) / torch.sqrt(var + eps)               # over the tokens, not the features
    return layer_norm


def inputs_isotropic(orig):
    return lambda sims, n, d, alpha, generator: orig(sims, n, d, 0.0, generator)  # alpha ignored


# ----------------------------------------------------------------------------- wu-what-networks-learned
def max_count_one(orig):
    from fractions import Fraction
    return lambda n, n_labels: Fraction(1)                      # the most frequent label counted once: no collisions


def copy_slot_as_random(orig):
    def closed_forms(config=None):
        out = orig() if config is None else orig(config)
        out["ic"]["copy_slot"] = out["ic"]["copy_random"]      # the best fixed slot scored as a random slot
        return out
    return closed_forms


def ic_sets_without_copy(orig):
    def ic_test_set(correct, distractor, n_seqs, seed, config=None):
        from posbias.science.task import TaskConfig
        ts = orig(correct, None, n_seqs, seed, config or TaskConfig())       # the distractor slot left alone
        ts.name = f"IC_{correct}_{distractor}" if distractor is not None else ts.name
        return ts
    return ic_test_set
