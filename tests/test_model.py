"""posbias.science.model: masks, PEs and residual act as stated; the ensemble is bit-for-bit its members."""
import math

import pytest
import torch
from torch.overrides import TorchFunctionMode

from posbias.science.model import ENGINES, EnsembleNet, MemberConfig
from posbias.science.task import ensemble_batch, make_task

CFGS = [MemberConfig("causal", "none"), MemberConfig("decay", "none"), MemberConfig("causal", "rope"),
        MemberConfig("full", "sin", residual=True), MemberConfig("window", "none", window=4),
        MemberConfig("prefix", "rope", prefix=3, residual=True)]


def _train(cfgs, seeds, steps=3, depth=2):
    tasks = [make_task(s) for s in seeds]
    net = EnsembleNet(cfgs, seeds, depth)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3, weight_decay=1e-6)
    for step in range(steps):
        x, y = ensemble_batch(tasks, seeds, [None] * len(seeds), step, 16)
        loss = torch.nn.functional.cross_entropy(net(x).flatten(0, 1), y.flatten(), reduction="none")
        opt.zero_grad()
        loss.view(len(seeds), -1).mean(1).sum().backward()
        opt.step()
    return net


def test_ensemble_is_bit_for_bit_its_members():
    torch.set_num_threads(1)
    seeds = [0, 1, 2, 3, 4, 5]
    big = _train(CFGS, seeds)
    for e in (0, 2, 3, 5):
        one = _train([CFGS[e]], [seeds[e]])
        for (name, p_big), (_, p_one) in zip(big.named_parameters(), one.named_parameters()):
            assert torch.equal(p_big[e], p_one[0]), (e, name)


def test_query_only_equals_full_last_layer():
    net = EnsembleNet(CFGS, list(range(6)), 3)
    x = torch.randn(6, 5, 17, 64) / 8
    full, maps = net(x, return_attention=True)
    assert torch.allclose(net(x), full, atol=1e-6)
    assert maps.shape == (6, 3, 5, 17, 17)


def test_attention_respects_masks_and_rows_sum_to_one():
    net = EnsembleNet(CFGS, list(range(6)), 2)
    _, maps = net(torch.randn(6, 4, 17, 64), return_attention=True)
    for e, cfg in enumerate(CFGS):
        m, _ = cfg.mask_and_bias(17)
        assert bool((maps[e][..., ~m] == 0).all())
        assert torch.allclose(maps[e].sum(-1), torch.ones(2, 4, 17), atol=1e-5)


def test_decay_bias_multiplies_weights_by_gamma_powers():
    cfg = MemberConfig("decay", "none", gamma=0.8)
    net = EnsembleNet([cfg], [0], 1)
    with torch.no_grad():
        net.w_q.zero_()                                  # equal logits: weights prop. to gamma^(i-j)
    _, maps = net(torch.randn(1, 1, 17, 64), return_attention=True)
    row = maps[0, 0, 0, 16]
    ratio = row[1:] / row[:-1]
    assert torch.allclose(ratio, torch.full_like(ratio, 1 / 0.8), rtol=1e-4)


def test_member_init_depends_only_on_its_seed():
    a = EnsembleNet(CFGS[:2], [7, 9], 2)
    b = EnsembleNet([CFGS[1]], [9], 2)
    assert torch.equal(a.w_q[1], b.w_q[0]) and torch.equal(a.cls_w[3][1], b.cls_w[3][0])


def test_causal_no_residual_query_ignores_nothing_but_window_does():
    # causal: the query token sees item 1, so changing it changes the output; with a window of 1 and no
    # residual the query sees only itself, and the same change leaves the output as it was
    x = torch.randn(1, 2, 17, 64)
    y = x.clone()
    y[:, :, 0] += 1.0
    causal = EnsembleNet([MemberConfig("causal", "none")], [0], 2)
    assert not torch.allclose(causal(x), causal(y))
    window = EnsembleNet([MemberConfig("window", "none", window=1)], [0], 2)
    assert torch.allclose(window(x), window(y))


def test_bad_configs_raise():
    with pytest.raises(ValueError):
        MemberConfig("diagonal")
    with pytest.raises(ValueError):
        MemberConfig("causal", "alibi")
    with pytest.raises(ValueError):
        EnsembleNet([MemberConfig()], [0, 1], 2)


@pytest.mark.parametrize("n,d", [(17, 64), (5, 8)])
def test_rotate_pairs_is_apply_rope(n, d):
    from posbias.science.attention import apply_rope, rope_angles
    from posbias.science.model import rotate_pairs

    ang = rope_angles(n, d)
    x = torch.randn(3, n, d)
    rot = torch.polar(torch.ones_like(ang), ang).to(torch.complex64)
    assert torch.allclose(rotate_pairs(x, rot), apply_rope(x, ang), atol=1e-6, rtol=0)


def test_attention_maps_equal_the_reference_attention():
    """The fused softmax of the model (mask and bias as one additive term) against the book's
    ``attention_weights`` (``masked_softmax``) for the first layer of every kind of member."""
    from posbias.science.attention import apply_rope, attention_weights

    net = EnsembleNet(CFGS, list(range(6)), 1)
    x = torch.randn(6, 4, 17, 64) / 8
    _, maps = net(x, return_attention=True)
    for e, cfg in enumerate(CFGS):
        h = x[e] + (net.pe if cfg.pe == "sin" else 0)
        q, k = h @ net.w_q[e, 0].detach(), h @ net.w_k[e, 0].detach()
        if cfg.pe == "rope":
            q, k = apply_rope(q, net.angles), apply_rope(k, net.angles)
        m, bias = cfg.mask_and_bias(17)
        ref = attention_weights(q, k, m, bias)
        assert torch.allclose(maps[e, 0], ref, atol=1e-6, rtol=0), cfg


# --- the network written out plainly (float64, one member at a time) from the module docstring ---------------------
SMALL = {"dim": 16, "n_labels": 5, "n_tokens": 9}        # T != D, so a transposed or mis-broadcast product fails


def _allowed_and_bias(cfg: MemberConfig, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Which keys ``j`` query ``i`` sees, and the logit bias, by a loop over ``(i, j)`` from the masks' definitions."""
    allowed, bias = torch.zeros(n, n, dtype=torch.bool), torch.zeros(n, n, dtype=torch.float64)
    for i in range(n):
        for j in range(n):
            allowed[i, j] = {"full": True, "causal": j <= i, "decay": j <= i,
                             "window": cfg.window is not None and i - cfg.window < j <= i,
                             "prefix": cfg.prefix is not None and (j < cfg.prefix or j <= i)}[cfg.mask]
            if cfg.mask == "decay" and j <= i:
                bias[i, j] = (i - j) * math.log(cfg.gamma)          # weights times gamma^(i-j)
    return allowed, bias


def _angles(n: int, d: int, base: float) -> torch.Tensor:
    """``pos / base^(2p/d)`` for ``pos < n``, ``p < d/2`` (the sinusoidal PE's and RoPE's angles)."""
    return torch.tensor([[pos / base ** (2 * p / d) for p in range(d // 2)] for pos in range(n)], dtype=torch.float64)


def _rotate(x: torch.Tensor, ang: torch.Tensor) -> torch.Tensor:
    """RoPE by hand: the pair ``(x[2p], x[2p+1])`` at position ``pos`` turned by the angle ``ang[pos, p]``."""
    out = x.clone()
    c, s = torch.cos(ang), torch.sin(ang)
    out[..., 0::2] = x[..., 0::2] * c - x[..., 1::2] * s
    out[..., 1::2] = x[..., 0::2] * s + x[..., 1::2] * c
    return out


def _reference(net: EnsembleNet, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits ``(E, b, L)`` and attention maps ``(E, depth, b, T, T)`` of ``net``, member by member in float64."""
    logits, maps = [], []
    for e, cfg in enumerate(net.configs):
        T, D = tokens.shape[2], tokens.shape[3]
        ang = _angles(T, D, cfg.rope_base)
        h = tokens[e].double()
        if cfg.pe == "sin":                                    # pe[pos, 2p] = sin, pe[pos, 2p+1] = cos
            h = h + torch.stack((torch.sin(ang), torch.cos(ang)), dim=-1).flatten(-2)
        allowed, bias = _allowed_and_bias(cfg, T)
        layer_maps = []
        for t in range(net.depth):
            q, k, v = (h @ w[e, t].detach().double() for w in (net.w_q, net.w_k, net.w_v))
            if cfg.pe == "rope":
                q, k = _rotate(q, ang), _rotate(k, ang)
            s = (q @ k.transpose(-1, -2) / math.sqrt(D) + bias).masked_fill(~allowed, float("-inf"))
            a = torch.softmax(s, dim=-1)
            layer_maps.append(a)
            h = a @ v + h if cfg.residual else a @ v
        z = h[:, -1]                                           # the query token
        for i in range(4):
            z = z @ net.cls_w[i][e].detach().double() + net.cls_b[i][e].detach().double()
            z = torch.relu(z) if i < 3 else z
        logits.append(z)
        maps.append(torch.stack(layer_maps))
    return torch.stack(logits), torch.stack(maps)


# (members, depth, batch, query_only): a mixed ensemble whose batch equals its number of RoPE members, depth 1,
# an all-RoPE ensemble with batch 1, and a lone member (E = 1) that computes the last layer in full
ENGINE_CASES = [(CFGS, 2, 2, True), (CFGS, 1, 3, True),
                ([MemberConfig("causal", "rope"), MemberConfig("prefix", "rope", prefix=3, residual=True)], 3, 1, True),
                ([MemberConfig("decay", "sin", residual=True, gamma=0.5)], 2, 2, False),
                ([MemberConfig("window", "sin", window=3)], 2, 1, True)]


@pytest.mark.parametrize("engine", ENGINES)
def test_every_engine_computes_the_documented_network(engine):
    """Each engine's logits and maps equal a plain float64 re-implementation of the module docstring."""
    gen = torch.Generator().manual_seed(5)
    for cfgs, depth, b, query_only in ENGINE_CASES:
        net = EnsembleNet(cfgs, list(range(len(cfgs))), depth, query_only=query_only, engine=engine, **SMALL)
        x = torch.randn(len(cfgs), b, SMALL["n_tokens"], SMALL["dim"], generator=gen)
        ref_logits, ref_maps = _reference(net, x)
        assert torch.allclose(net(x).double(), ref_logits, atol=1e-5, rtol=1e-4), (engine, cfgs)
        logits, maps = net(x, return_attention=True)
        assert torch.allclose(logits.double(), ref_logits, atol=1e-5, rtol=1e-4), (engine, cfgs)
        assert torch.allclose(maps.double(), ref_maps, atol=1e-6, rtol=0), (engine, cfgs)


class _BmmShapes(TorchFunctionMode):
    """Records ``(rows, columns)`` of the product of every ``torch.bmm`` call made while active."""

    def __init__(self) -> None:
        super().__init__()
        self.shapes: list[tuple[int, int]] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.bmm:
            self.shapes.append((args[0].shape[1], args[1].shape[-1]))
        return func(*args, **(kwargs or {}))


def _projections(engine: str, return_attention: bool, b: int = 3) -> list[tuple[int, int]]:
    net = EnsembleNet(CFGS[:2], [0, 1], 2, engine=engine, **SMALL)
    with _BmmShapes() as rec:
        net(torch.zeros(2, b, SMALL["n_tokens"], SMALL["dim"]), return_attention=return_attention)
    return rec.shapes


def test_engines_make_the_projections_their_docstring_declares():
    """v2: Q, K, V one product each; v3: one fused QKV product per layer; the last layer projects Q of one row only."""
    b, T, D = 3, SMALL["n_tokens"], SMALL["dim"]                # shapes worked by hand, depth 2
    assert _projections("v2", False) == [(b * T, D)] * 3 + [(b, D), (b * T, D), (b * T, D)]
    assert _projections("v3", False) == [(b * T, 3 * D), (b * T, 2 * D), (b, D)]
    assert _projections("v2", True) == [(b * T, D)] * 6            # maps asked: every row of every layer
    assert _projections("v3", True) == [(b * T, 3 * D)] * 2


# --- construction: init, validation, buffers -------------------------------------------------------------------------
def test_init_is_uniform_within_one_over_sqrt_fan_in():
    """Every weight lies in ``[-1/sqrt(fan_in), 1/sqrt(fan_in)]`` and reaches both ends (PyTorch's Linear init)."""
    net = EnsembleNet([MemberConfig()], [0], 2)
    bound = 1 / math.sqrt(64)                  # fan_in = D = 64 for every matrix here (worked by hand)
    for w in (p.detach() for p in (net.w_q, net.w_k, net.w_v, net.cls_w[0], net.cls_w[3])):
        # >= 2048 draws: P(max < 0.98 bound) = 0.99^2048 < 1e-8, so both ends are reached for any seed
        assert float(w.abs().max()) <= bound
        assert float(w.max()) > 0.98 * bound and float(w.min()) < -0.98 * bound


def test_defaults_are_the_papers_shapes():
    """With the defaults: 64-dim tokens, 17 of them, 32 labels."""
    net = EnsembleNet([MemberConfig()], [0], 1)
    assert net(torch.zeros(1, 2, 17, 64)).shape == (1, 2, 32)


def test_state_dict_holds_the_parameters_and_no_buffer():
    """Masks, biases, PEs, flags and rotations are derived buffers, left out of the state dict."""
    net = EnsembleNet(CFGS, list(range(6)), 2)
    assert set(net.state_dict()) == {"w_q", "w_k", "w_v"} | {f"cls_{k}.{i}" for k in "wb" for i in range(4)}


def test_flag_buffers_are_float_and_follow_the_module_dtype():
    """``use_sin`` and ``residual`` are float flags (cast by ``.double()``); ``rope_members`` is an index (long)."""
    net = EnsembleNet([MemberConfig("causal", "sin", residual=True), MemberConfig()], [0, 1], 1)
    assert net.use_sin.dtype == net.residual.dtype == torch.float32
    assert EnsembleNet([MemberConfig()], [0], 1).rope_members.dtype == torch.long   # empty: no RoPE member
    net.double()
    assert net.use_sin.dtype == net.residual.dtype == torch.float64
    assert net.use_sin.flatten().tolist() == [1.0, 0.0] and net.residual.flatten().tolist() == [1.0, 0.0]


def test_decay_bias_is_float32():
    """The decay member's logit bias is float32 like the others, so the network's logits stay float32."""
    _, bias = MemberConfig("decay", gamma=0.5).mask_and_bias(5)
    assert bias.dtype == torch.float32
    assert float(bias[4, 0]) == pytest.approx(4 * math.log(0.5))       # -m (i - j), m = -ln 0.5 (by hand)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)              # float32 even when the default float type is not
    try:
        assert MemberConfig("decay").mask_and_bias(3)[1].dtype == torch.float32
    finally:
        torch.set_default_dtype(previous)


def test_rope_base_is_the_members():
    """A member's own ``rope_base`` sets the rotation (checked against the float64 reference)."""
    cfg = MemberConfig("causal", "rope", rope_base=100.0)
    net = EnsembleNet([cfg], [0], 1, **SMALL)
    x = torch.randn(1, 2, SMALL["n_tokens"], SMALL["dim"], generator=torch.Generator().manual_seed(1))
    ref_logits, _ = _reference(net, x)
    assert torch.allclose(net(x).double(), ref_logits, atol=1e-5, rtol=1e-4)


def test_gamma_range_is_half_open():
    """``gamma`` in ``(0, 1]``: 1 (no decay) allowed, 0 and above 1 refused."""
    _, bias = MemberConfig("decay", gamma=1.0).mask_and_bias(4)
    assert bool((bias == 0).all())                     # gamma = 1: m = 0, no bias (by hand)
    for gamma in (0.0, 1.5, -0.5):
        with pytest.raises(ValueError, match=r"decay gamma must be in \(0, 1\]"):
            MemberConfig("decay", gamma=gamma)


def test_bad_configs_name_the_fix():
    """Each refusal says what is wrong and what to choose."""
    with pytest.raises(ValueError, match="unknown mask 'diagonal'; choose one of"):
        MemberConfig("diagonal")
    with pytest.raises(ValueError, match="unknown PE 'alibi'; choose one of"):
        MemberConfig("causal", "alibi")
    with pytest.raises(ValueError, match="unknown engine 'v9'; choose one of"):
        EnsembleNet([MemberConfig()], [0], 1, engine="v9")
    with pytest.raises(ValueError, match="need one seed per member and at least one member"):
        EnsembleNet([MemberConfig()], [0, 1], 1)
    with pytest.raises(ValueError, match="need one seed per member and at least one member"):
        EnsembleNet([], [], 1)
    with pytest.raises(ValueError, match="depth must be >= 1"):
        EnsembleNet([MemberConfig()], [0], 0)
    with pytest.raises(ValueError, match="all members of one ensemble must share the RoPE base"):
        EnsembleNet([MemberConfig(rope_base=100.0), MemberConfig(rope_base=1000.0)], [0, 1], 1)
