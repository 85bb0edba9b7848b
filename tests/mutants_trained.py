"""Curated mutants of the library the trained-network chapters read: wrong versions it must catch.

A trained chapter's checks test the records its networks leave (accuracies as counts out of the test
set, gaps from accuracies, attention inside the mask, sink statistics, stops under the rule) and the
committed paper-profile networks it reads. Each mutant below replaces one function for a smoke
execution of the chapters listed; a mutant of what training records runs with ``own_cache``, so the
smoke networks are trained again under it instead of read from the baseline's cache. ``tests/test_mutations.py`` asserts
each is caught and records which check catches it in ``data/mutants/teeth.json``.
"""
from __future__ import annotations

import copy
import dataclasses

import numpy as np
import torch

from posbias.book.mutation import Mutant


def _accuracy_over_n_plus_one(orig):
    def accuracy(net, tasks, ts, chunk=1024):
        n = len(ts.target)
        return orig(net, tasks, ts, chunk) * n / (n + 1)       # correct count / (n_test + 1)
    return accuracy


def _gaps_reversed(orig):
    return lambda acc: {k: -v for k, v in orig(acc).items()}  # acc(IC_b_a) - acc(IC_a_b)


def _final_accuracy_first_eval(orig):
    def final_accuracy(units):
        names = [n for n in units[0]["curves"] if n.startswith("IC_")]
        return torch.tensor([float(np.mean([u["curves"][n][0] for n in names])) for u in units])
    return final_accuracy                                       # the untrained networks' accuracy


def _loss_drop_reversed(orig):
    def training_sanity(units, n_test, n_labels=32):
        s = orig(units, n_test, n_labels)
        return {**s, "loss_drop": -s["loss_drop"], "best_drop": -s["best_drop"]}  # last minus first
    return training_sanity


def _sink_alpha_row_count(orig):
    def sink_alpha(attn, mask):
        m = mask.to(attn.dtype)
        return (attn * m).sum(-2) / m.sum(-1)                   # keys each query sees, not queries seeing k
    return sink_alpha


def _sink_share_unthresholded(orig):
    def sink_share(attn, mask, threshold=0.3):
        from posbias.measures.evaluate import sink_alpha

        return sink_alpha(attn, mask).flatten(0, -2).mean(0)    # mean alpha_k, no threshold
    return sink_share


def _excess_peak_zero_based(orig):
    def excess_peaks(excess):
        out = orig(excess)
        for label, e in excess.items():
            m = torch.as_tensor(e, dtype=torch.float64).mean(0)
            top = int(m[:m.shape[0] - 1].argmax())              # 0-based key
            out[label] = type(out[label])(out[label].first, top, top % 2 == 0)
        return out
    return excess_peaks


def _net_ignores_mask(orig):
    class EnsembleNet(orig):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            self.logit_bias = self.bias.clone()                 # the bias without the mask's -inf
    return EnsembleNet


def _llm_alpha_all_queries(orig):
    def sink_alpha(attn, causal=True):
        return attn.sum(dim=-2) / attn.shape[-1]                # every query counted, seen or not
    return sink_alpha


def _gap_curve_reversed(orig):
    return lambda curves, name: -orig(curves, name)


def _gap_curve_one_early(orig):
    def gap_curve(curves, name):
        g = orig(curves, name)
        return np.concatenate([g[:1], g[:-1]])                  # each evaluation shows the one before
    return gap_curve


def _window_change_slope(orig):
    return lambda steps, values, end, window: orig(steps, values, end, window) / window  # slope, not change


def _reading_40k(orig):
    return lambda run, end=None, window=50_000: orig(run, end, 40_000)  # nine evaluations, not eleven


def _best_kept_at_highest(orig):
    class BestWeights(orig):
        def update(self, net, step, loss):
            if step == 0:
                return
            sd = net.state_dict()
            for e, value in enumerate(loss.tolist()):
                if not value < self.loss[e] or self.step[e] is None:    # keeps the higher loss
                    self.step[e], self.loss[e] = step, float(value)
                    for k, v in sd.items():
                        self.net[k][e] = v[e].detach()
    return BestWeights


def _branches_never_cut(orig):
    return lambda end_accuracy, gap=0.05: [sorted(end_accuracy, key=end_accuracy.get)] if end_accuracy else []


def _design_margin_widened(orig):
    return {**orig, "margin": 0.03}                             # the code's design drifts from the page's


def _jump_every_50k(orig):
    return {**orig, "every": 50_000}                             # the jump study's code drifts from the page's


def _budget_deep_250k(orig):
    return lambda depth: 250_000 if depth == 6 else orig(depth)  # the depth-6 budget below the declared 300k


def _best_reading_at_highest(orig):
    def best_reading(run):
        c = run["curves"]
        if "heldout_loss" not in c:
            return orig(run)
        flipped = orig({**run, "curves": {**c, "heldout_loss": [-x for x in c["heldout_loss"]]}})
        return {**flipped, "heldout_loss": -flipped["heldout_loss"]}     # the evaluation of highest loss
    return best_reading


def _evaluations_labelled_by_last_batch(orig):
    class Ensemble(orig):
        def evaluate(self, step):
            super().evaluate(step)
            if step > 0:
                self.curves["step"][-1] = step - 1              # the index of the last batch, not the steps done
    return Ensemble


def _paper_reads_default(orig):
    def stored_campaign(experiment, profile="paper", **overrides):
        return orig(experiment, "default" if profile == "paper" else profile, **overrides)
    return stored_campaign                                      # the paper section reads the short runs


def _rule_window_40k(orig):
    import dataclasses

    return lambda name: dataclasses.replace(orig(name), window=40_000)  # trains under another rule


def _gap_se_pooled(orig):
    return lambda curves, name, n_test: orig(curves, name, n_test) * np.sqrt(2.0)  # one set counted twice


# ------------------------------------------------------------------ records as a wrong writer would store them
# The committed records are verified against data/manifest.json before any chapter reads them, so an
# edited file never reaches a check; what the paper-profile checks guard against is a record written
# wrong, by the code of its day, and hashed as written. These mutants return every looked-up record as
# such a writer would have stored it (the smoke networks' records too). wu-bias-over-training is not
# given the curves one evaluation short: its table of verdicts against iteration then raises ("no
# evaluation at step 100000") before its check on where the curves end, a crash rather than a catch;
# its curves' step labels one evaluation late reach that check instead. One mutant returns a right
# record under the wrong key, as a store keyed without the mask would (`_full_reads_causal`).
def _record_edit(edit):
    def make(orig):
        def lookup(unit):
            rec = orig(unit)
            return None if rec is None else edit(copy.deepcopy(rec))
        return lookup
    return make


def _gaps_one_eval_stale(rec):
    c = rec["curves"]                                           # gaps from the evaluation before the last
    rec["gaps"] = {k: c[f"IC_{a}_{b}"][-2] - c[f"IC_{b}_{a}"][-2] for k in rec["gaps"] for a, b in [k.split("-")]}
    return rec


def _accuracies_over_n_plus_one(rec):
    n = rec["params"]["n_test"]                                 # correct count / (n_test + 1), gaps alike
    rec["ic_accuracy"] = {k: v * n / (n + 1) for k, v in rec["ic_accuracy"].items()}
    rec["curves"] = {k: [x * n / (n + 1) for x in v] if k.startswith("IC_") else v for k, v in rec["curves"].items()}
    rec["gaps"] = {k: v * n / (n + 1) for k, v in rec["gaps"].items()}
    return rec


def _curves_one_eval_short(rec):
    rec["curves"] = {k: v[:-1] for k, v in rec["curves"].items()}  # the last evaluation never written
    return rec


def _steps_one_eval_late(rec):
    every = rec["params"]["eval_every"]                         # each evaluation labelled with the next one's step
    rec["curves"] = {**rec["curves"], "step": [s + every for s in rec["curves"]["step"]]}
    return rec


def _attention_unmasked(rec):
    a = np.asarray(rec["mean_attention"], dtype=float)         # maps averaged before the mask: uniform rows
    rec["mean_attention"] = (np.ones_like(a) / a.shape[-1]).tolist()
    return rec


def _full_reads_causal(orig):
    def lookup(unit):
        if unit.config.mask == "full":                           # records keyed without the mask
            unit = dataclasses.replace(unit, config=dataclasses.replace(unit.config, mask="causal"))
        return orig(unit)
    return lookup


def _residual_flag_dropped(rec):
    rec["params"] = {**rec["params"], "residual": False}       # the record's settings without the residual
    return rec


# closed forms a page shows (issue 96): each asserted by a check against an independent value
def _uniform_over_one_more(orig):
    def uniform_sink_alpha(mask):
        from posbias.measures.evaluate import sink_alpha

        m = mask.to(torch.float64)
        return sink_alpha(m / (m.sum(-1, keepdim=True) + 1), mask)   # each row spread over one key more than it sees
    return uniform_sink_alpha


def _trend_per_token(orig):
    return lambda sizes: orig(sizes) / (max(sizes) - min(sizes))  # a slope per token, not the change


def _uniform_share_one_token_more(orig):
    return lambda n: orig(n + 1)  # H_(n+1) / (n + 1): a token that is not there


def _kv_bytes_keys_only(orig):
    def kv_bytes_per_token(layers, kv_heads, head_dim, bytes_per_number=2):
        return layers * kv_heads * head_dim * bytes_per_number        # the keys only: the values forgotten
    return kv_bytes_per_token


def _kv_shape_query_heads(orig):
    return {**orig, "kv_heads": 9}                                    # the 9 query heads, not the 3 key/value heads


def _copy_random_without_chance(orig):
    def closed_forms(*args, **kwargs):
        from posbias.science.task import TaskConfig

        cfg = args[0] if args else kwargs.get("config", TaskConfig())
        out = orig(*args, **kwargs)
        out["ic"]["copy_random"] = cfg.burstiness / cfg.n_items      # a label equal to the query's by chance left out
        return out
    return closed_forms


def _sweep_ceiling_over_n_plus_one(orig):
    def closed_forms(*args, **kwargs):
        from posbias.science.task import TaskConfig

        n = (args[0] if args else kwargs.get("config", TaskConfig())).n_items
        out = orig(*args, **kwargs)
        for k in ("ignore_best", "dup_vote"):
            out["sweep"][k] *= n / (n + 1)                            # E[largest label count] / (N + 1)
        return out
    return closed_forms


def _uniform_share_over_n_plus_one(orig):
    return lambda n: orig(n) * n / (n + 1)                           # H_n / (n + 1): one token too many shared over


E, C, MD, LL = "posbias.measures.evaluate", "posbias.measures.convergence", "posbias.science.model", "posbias.llm"
TRAINED = ("wu-fig-2", "wu-fig-3", "wu-fig-4", "wu-fig-5", "wu-fig-6", "wu-residual-depth")
GAPS = ("wu-fig-2", "wu-fig-3", "wu-fig-4", "wu-residual-depth")

TRAINED_MUTANTS: list[Mutant] = [
    Mutant("accuracy-over-n-plus-one", f"{E}.accuracy", "accuracy as the correct count over n_test + 1",
           _accuracy_over_n_plus_one, TRAINED, own_cache=True),
    Mutant("gaps-reversed", f"{E}.gaps", "gaps taken the other way round, acc(IC_b_a) - acc(IC_a_b)",
           _gaps_reversed, GAPS, own_cache=True),
    Mutant("final-accuracy-first-eval", f"{E}.final_accuracy", "final accuracy read at the first evaluation "
           "(the untrained network)", _final_accuracy_first_eval, TRAINED),
    Mutant("loss-drop-reversed", f"{E}.training_sanity", "loss change measured last interval minus first",
           _loss_drop_reversed, TRAINED),
    Mutant("sink-alpha-row-count", f"{E}.sink_alpha", "alpha_k divided by the keys each query sees instead of "
           "the queries that see key k", _sink_alpha_row_count, ("wu-fig-5", "wu-fig-6", "sinks-synthetic-vs-real")),
    Mutant("sink-share-unthresholded", f"{E}.sink_share", "sink share as the mean alpha_k, not the share of "
           "alpha_k above the threshold", _sink_share_unthresholded, ("wu-fig-6",), own_cache=True),
    Mutant("excess-peak-zero-based", f"{E}.excess_peaks", "the key with the largest excess reported 0-based",
           _excess_peak_zero_based, ("wu-fig-6",)),
    Mutant("net-ignores-mask", f"{MD}.EnsembleNet", "the network adds the positional bias but not the mask's "
           "-inf", _net_ignores_mask, ("wu-fig-5", "wu-fig-6"), own_cache=True),
    Mutant("llm-alpha-all-queries", f"{LL}.sink_alpha", "the real-model alpha_k divided by every query, "
           "including those the mask hides it from", _llm_alpha_all_queries, ("sinks-synthetic-vs-real",)),
    Mutant("gap-curve-reversed", f"{C}.gap_curve", "gap curves taken the other way round", _gap_curve_reversed,
           ("wu-bias-over-training",)),
    Mutant("gap-curve-one-early", f"{C}.gap_curve", "gap curves shifted one evaluation late",
           _gap_curve_one_early, ("wu-bias-over-training",)),
    Mutant("window-change-slope", f"{C}.window_change", "the stopping rule's change over the window as a "
           "slope per iteration", _window_change_slope, ("wu-bias-over-training",)),
    Mutant("budget-reading-40k", "posbias.analysis.budget.reading", "a network read over the last 40,000 iterations "
           "(nine evaluations), not the declared 50,000", _reading_40k, ("wu-bias-over-training",)),
    Mutant("best-kept-at-highest", "posbias.training.heldout.BestWeights", "the weights kept at a higher held-out "
           "loss than the lowest", _best_kept_at_highest, ("wu-bias-over-training",), own_cache=True),
    Mutant("design-margin-widened", "posbias.analysis.budget.DESIGN", "the design in the code with a still-moving "
           "margin of 0.03, not the declared 0.02", _design_margin_widened, ("wu-bias-over-training",)),
    Mutant("jump-every-50k", "posbias.analysis.jump.DESIGN", "the jump study's design in the code keeping weights "
           "every 50,000 iterations, not the declared 25,000", _jump_every_50k, ("wu-bias-over-training",)),
    Mutant("budget-deep-250k", "posbias.analysis.budget.budget", "a depth-6 budget of 250,000 iterations, not the "
           "declared 300,000", _budget_deep_250k, ("wu-bias-over-training",)),
    Mutant("best-reading-at-highest", "posbias.analysis.budget.best_reading", "the secondary reading at the evaluation "
           "of highest held-out loss", _best_reading_at_highest, ("wu-bias-over-training",)),
    Mutant("evaluations-labelled-by-last-batch", "posbias.training.loop.Ensemble", "each evaluation labelled with "
           "the index of its last batch (one less than the iterations done)", _evaluations_labelled_by_last_batch,
           ("wu-bias-over-training",), own_cache=True),
    Mutant("branches-never-cut", "posbias.analysis.budget.branches",
           "every network of a configuration put in one branch", _branches_never_cut, ("wu-bias-over-training",)),
    Mutant("paper-reads-default", "posbias.training.campaigns.stored_campaign", "the committed paper-profile "
           "networks looked up under the default profile", _paper_reads_default, TRAINED[:5]),
    Mutant("rule-window-40k", f"{C}.rule", "the stopping rule looked up with a 40,000-iteration window",
           _rule_window_40k, ("wu-bias-over-training",)),
    Mutant("gap-se-pooled", f"{C}.gap_se", "the gap's standard error sqrt(2) too large",
           _gap_se_pooled, ("wu-bias-over-training",)),
    Mutant("record-gaps-stale", "posbias.training.campaigns.lookup", "records store the gaps of the evaluation "
           "before the last", _record_edit(_gaps_one_eval_stale), GAPS),
    Mutant("record-accuracy-over-n-plus-one", "posbias.training.campaigns.lookup", "records store every accuracy "
           "as the correct count over n_test + 1", _record_edit(_accuracies_over_n_plus_one), TRAINED),
    Mutant("record-curves-one-short", "posbias.training.campaigns.lookup", "records lack the last evaluation of "
           "their curves", _record_edit(_curves_one_eval_short), ("wu-fig-3", "wu-fig-5", "wu-residual-depth")),
    Mutant("record-steps-one-late", "posbias.training.campaigns.lookup", "records label each evaluation with "
           "the step of the one after it", _record_edit(_steps_one_eval_late), ("wu-bias-over-training",)),
    Mutant("record-attention-unmasked", "posbias.training.campaigns.lookup", "records store mean attention maps "
           "with weight on every key, the masked ones too", _record_edit(_attention_unmasked),
           ("wu-fig-5", "wu-fig-6")),
    Mutant("record-residual-dropped", "posbias.training.campaigns.lookup", "records' settings say no residual "
           "connection", _record_edit(_residual_flag_dropped), ("wu-fig-5", "wu-residual-depth")),
    Mutant("record-full-reads-causal", "posbias.training.campaigns.lookup", "records keyed without the mask: a "
           "full-mask network is read from the causal network's record", _full_reads_causal, ("wu-fig-3",)),
    # closed forms a page shows (issue 96)
    Mutant("uniform-alpha-one-more-key", f"{E}.uniform_sink_alpha", "uniform attention spread over one key more "
           "than each query sees", _uniform_over_one_more, ("wu-fig-6", "sinks-synthetic-vs-real")),
    Mutant("trend-per-token", "posbias.analysis.claims.quantities._trend_weights", "the least-squares trend over the "
           "mask sizes as a slope per token, not its change over the range", _trend_per_token, ("wu-fig-6",)),
    Mutant("retrieval-copy-random-no-chance", "posbias.science.retrieval.closed_forms", "copying a random context "
           "label scored B/N, without the chance that another label equals the query's", _copy_random_without_chance,
           ("wu-fig-2",)),
    Mutant("retrieval-sweep-ceiling-n-plus-one", "posbias.science.retrieval.closed_forms", "the sweep's ceiling for a "
           "network ignoring the query as E[largest label count] / (N + 1)", _sweep_ceiling_over_n_plus_one,
           ("wu-fig-2",)),
    Mutant("uniform-share-one-token-more", f"{LL}.tables.uniform_alpha_first", "token 1's uniform share over "
           "n + 1 tokens, H_(n+1) / (n + 1)", _uniform_share_one_token_more, ("sinks-real-decoder",)),
    Mutant("kv-bytes-keys-only", f"{LL}.tables.kv_bytes_per_token", "a cached token's bytes counting the keys "
           "but not the values", _kv_bytes_keys_only, ("sinks-streaming",)),
    Mutant("kv-shape-query-heads", f"{LL}.tables.SMOLLM2_KV", "SmolLM2's cache shape with its 9 query heads as "
           "key/value heads", _kv_shape_query_heads, ("sinks-streaming",)),
    Mutant("uniform-share-over-n-plus-one", f"{LL}.tables.uniform_alpha_first", "token 1's uniform share as "
           "H_n / (n + 1)", _uniform_share_over_n_plus_one, ("sinks-real-decoder",)),
]
