"""posbias.science.model: masks, PEs and residual act as stated; the ensemble is bit-for-bit its members."""
import pytest
import torch

from posbias.science.model import EnsembleNet, MemberConfig
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
