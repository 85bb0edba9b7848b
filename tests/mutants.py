"""The curated mutants: wrong versions of the science library that a theory chapter must catch.

Each entry replaces one function (``target``) for the smoke execution of the chapters listed; the
chapter must then end with at least one failed check (``tests/test_mutations.py``), the same check at the
chapter's own seed and at two others. The first of each
chapter's group are the twelve changes of issue 46; the rest are off-by-one masks, sign flips, dropped
normalisations, swapped layer orders, wrong constants and mechanisms switched off (the rollout's product,
LayerNorm, the residual, the inputs' shared component). ``data/mutants/teeth.json`` records which check
kills which mutant; the Status page reads it.
"""
from __future__ import annotations

import mutant_wrongs as w
import mutant_wrongs_closed as wc

from posbias.book.mutation import Mutant

# ----------------------------------------------------------------------------- the catalogue
T, M, R, A, L = ("posbias.science.theory", "posbias.science.masks", "posbias.science.rollout",
                 "posbias.science.attention", "posbias.science.lnsim")

MUTANTS: list[Mutant] = [
    # wu-thm-4-1
    Mutant("rollout-reversed", f"{R}.rollout", "reversed product order in rollout: A(0) ... A(t)",
           w.rollout_reversed, ("wu-thm-4-1",)),
    Mutant("causal-upper", f"{M}.causal_mask", "causal mask flipped to upper triangular", w.causal_upper,
           ("wu-thm-4-1",)),
    Mutant("rollout-one-layer-late", f"{R}.rollout", "P(t) built from t layers instead of t + 1",
           w.rollout_one_layer_late, ("wu-thm-4-1",)),
    Mutant("softmax-unnormalised", f"{A}.masked_softmax", "softmax divided by the number of allowed entries, "
           "not by the sum of the weights", w.softmax_unnormalised, ("wu-thm-4-1",)),
    Mutant("rollout-no-product", f"{R}.rollout", "rollout returns each layer's own weights: P(t) = A(t)",
           w.rollout_no_product, ("wu-thm-4-1",)),
    # wu-thm-4-2
    Mutant("window-wider", f"{M}.sliding_window_mask", "sliding window j >= i - w (one wider)", w.window_wider,
           ("wu-thm-4-2",)),
    Mutant("window-narrower", f"{M}.sliding_window_mask", "sliding window j > i - w + 1 (one narrower)",
           w.window_narrower, ("wu-thm-4-2",)),
    Mutant("window-hops-floor", f"{M}.window_hops", "hop count floor((N-1)/(w-1)) instead of the ceiling",
           w.window_hops_floor, ("wu-thm-4-2",)),
    Mutant("hop-distance-plus-one", f"{M}.hop_distance", "hop distance one too large", w.hop_plus_one,
           ("wu-thm-4-2",)),
    Mutant("window-ignored", f"{M}.sliding_window_mask", "the window dropped: a plain causal mask", w.window_ignored,
           ("wu-thm-4-2",)),
    Mutant("stream-no-product", f"{R}.stream_rollout", "stream_rollout keeps each layer's own weights, "
           "never their product", w.stream_no_product, ("wu-thm-4-2",)),
    # wu-thm-4-3
    Mutant("stream-reversed", f"{R}.stream_rollout", "reversed product order in stream_rollout",
           w.stream_reversed, ("wu-thm-4-3",)),
    Mutant("prefix-wider", f"{M}.prefix_mask", "prefix mask j <= K (one prefix token too many)", w.prefix_wider,
           ("wu-thm-4-3",)),
    Mutant("stream-one-layer-late", f"{R}.stream_rollout", "stream_rollout keeps P one layer late",
           w.stream_drops_first, ("wu-thm-4-3",)),
    Mutant("softmax-ignores-mask", f"{A}.masked_softmax", "softmax over every position, the mask ignored",
           w.softmax_ignores_mask, ("wu-thm-4-3",)),
    # wu-thm-4-5
    Mutant("kappa-no-minus-one", f"{T}.decay_critical_distance", "kappa = (L-1)/(e^m-1) without the - 1",
           w.kappa_no_minus_one, ("wu-thm-4-5",)),
    Mutant("decay-bias-half", f"{A}.decay_bias", "decay bias -m (i-j) / 2 (wrong constant)", w.decay_bias_half,
           ("wu-thm-4-5",)),
    Mutant("path-count-shift", f"{T}.log_path_count", "C(k+L, k) instead of C(k+L-1, k)", w.path_count_shift,
           ("wu-thm-4-5",)),
    Mutant("stirling-exp", f"{T}.decay_critical_distance_stirling", "Stirling peak (L-1)/e^m instead of "
           "(L-1)/(e^m - 1)", w.stirling_exp, ("wu-thm-4-5",)),
    Mutant("band-j-plus-two", f"{T}.decay_band", "upper band with 1 - gamma^(j+2)", w.band_j, ("wu-thm-4-5",)),
    Mutant("decay-peaks-unflipped", f"{T}.decay_peaks", "peak read from the first token: the row not flipped",
           w.decay_peaks_unflipped, ("wu-thm-4-5",)),
    # wu-thm-4-7
    Mutant("slopes-fl-times-5", f"{T}.rope_critical_slopes", "f_L times 5 in the implicit derivative",
           w.slopes_fl5, ("wu-thm-4-7",)),
    Mutant("rope-path-sum-short", f"{T}.rope_path_sum_log", "path sum over L - 1 layers", w.rope_sum_one_short,
           ("wu-thm-4-7",)),
    Mutant("rope-not-rotation", f"{A}.apply_rope", "RoPE with a sign error: not a rotation", w.rope_rotation_sign,
           ("wu-thm-4-7",)),
    Mutant("rope-stirling-c-theta", f"{T}.rope_critical_distance_stirling", "Stirling root with c theta for c",
           w.rope_stirling_theta2, ("wu-thm-4-7",)),
    Mutant("half-rope-no-ln2", f"{T}.half_weight_distance_rope", "half-weight distance without ln 2",
           w.half_rope_no_ln2, ("wu-thm-4-7",)),
    Mutant("rope-rollout-unnormalised", f"{T}.rope_rollout_row_log", "P = A^L without dividing each row by its Z",
           w.rope_rollout_unnormalised, ("wu-thm-4-7",)),
    Mutant("rope-path-sum-reversed", f"{T}.rope_path_sum_log", "path sum indexed from the first token",
           w.rope_path_sum_reversed, ("wu-thm-4-7",)),
    Mutant("slowest-angle-second-pair", f"{T}.rope_slowest_angle", "slowest angle base^(-2/d): the second pair's",
           w.slowest_angle_second_pair, ("wu-thm-4-7",)),
    # wu-center-nodes
    Mutant("center-any", f"{M}.center_nodes", "center nodes reachable from SOME token instead of every token",
           w.center_any, ("wu-center-nodes",)),
    Mutant("is-closed-inverted", f"{M}.is_closed", "is_closed answers the opposite", w.is_closed_inverted,
           ("wu-center-nodes",)),
    Mutant("center-stream-reversed", f"{R}.stream_rollout", "reversed product order in stream_rollout",
           w.stream_reversed, ("wu-center-nodes",)),
    Mutant("center-prefix-wider", f"{M}.prefix_mask", "prefix mask j <= K", w.prefix_wider, ("wu-center-nodes",)),
    Mutant("center-reversed", f"{M}.center_nodes", "center nodes: the tokens that reach every token",
           w.center_reversed, ("wu-center-nodes", "wu-thm-4-2")),
    Mutant("full-lower", f"{M}.full_mask", "the full mask built lower-triangular", w.full_lower,
           ("wu-center-nodes",)),
    # kim-thm-1
    Mutant("slope-factor-one", f"{L}.alpha0_slope_factor", "next-order factor set to 1", w.slope_factor_one,
           ("kim-thm-1",)),
    Mutant("slope-factor-sign", f"{L}.alpha0_slope_factor", "next-order factor 1 - 1/sqrt(d) + 2/d",
           w.slope_factor_sign, ("kim-thm-1",)),
    Mutant("thm1-primacy", f"{L}.layer2_scores", "layer-2 closed form with the key order reversed",
           w.layer2_transposed, ("kim-thm-1",)),
    Mutant("thm1-lognormal-var0", f"{L}.layer1_offdiag_moments", "log-normal variance set to 0",
           w.lognormal_var0, ("kim-thm-1",)),
    Mutant("slope-reversed", "posbias.science.lntheory.slope_contrast", "within-row slope taken against the reversed "
           "key order (its sign flipped), in the simulations and the closed forms alike", w.slope_reversed,
           ("kim-thm-1", "kim-prop-1", "kim-prop-3"), fresh=True),
    Mutant("layernorm-identity", f"{L}.layer_norm", "LayerNorm that returns its input", w.layernorm_identity,
           ("kim-thm-1", "kim-prop-2", "kim-prop-3", "kim-fig-1", "kim-fig-2"), fresh=True),
    Mutant("layernorm-token-axis", f"{L}.layer_norm", "LayerNorm over the token axis instead of the features",
           w.layernorm_token_axis, ("kim-thm-1", "kim-prop-2", "kim-prop-3", "kim-fig-1"), fresh=True),
    # kim-prop-1
    Mutant("uniform-layer1", f"{L}.noln_mean_field", "uniform layer-1 weights in Prop 1's mean field",
           w.uniform_layer1, ("kim-prop-1",)),
    Mutant("mean-field-sqrt-d", f"{L}.noln_mean_field", "mean-field scores C sqrt(d) / d", w.mean_field_sqrt_d,
           ("kim-prop-1",)),
    Mutant("mean-field-no-update", f"{L}.noln_mean_field", "mean field that never updates its Gram matrix",
           w.mean_field_no_update, ("kim-prop-1",)),
    Mutant("layernorm-forced", f"{L}.stack_forward", "the stack normalises even when asked not to "
           "(layernorm=False ignored)", w.layernorm_forced, ("kim-prop-1", "kim-beyond-rope"), fresh=True),
    Mutant("decay-forced", f"{L}.stack_forward", "the stack adds the recency bias -0.5 (i - j) to every layer's "
           "scores when asked for none", w.decay_forced, ("kim-prop-1",), fresh=True),
    # kim-prop-2
    Mutant("residual-sigma-one", f"{L}.layer2_scores", "residual sigma 1 instead of 1/sqrt(d (1 - alpha))",
           w.residual_sigma1, ("kim-prop-2",)),
    Mutant("fisher-sign", f"{L}.layer1_offdiag_moments", "Fisher correction with the wrong sign", w.fisher_sign,
           ("kim-prop-2",)),
    Mutant("residual-adds-h", f"{L}.stack_forward", "the residual adds LN(x) instead of x", w.stack_residual_h,
           ("kim-prop-2",), fresh=True),
    # kim-prop-3
    Mutant("lognormal-var0", f"{L}.layer1_offdiag_moments", "log-normal variance set to 0 (the paper's weights)",
           w.lognormal_var0, ("kim-prop-3", "kim-fig-2")),
    Mutant("residual-dropped", f"{L}.stack_forward", "the stack drops the residual (residual=True ignored)",
           w.residual_dropped, ("kim-prop-2",), fresh=True),
    Mutant("alpha-to-l-sqrt", f"{L}.alpha_to_l", "l = sqrt(alpha) instead of sqrt(alpha / (1 - alpha))",
           w.alpha_to_l_sqrt, ("kim-prop-3",), fresh=True),
    Mutant("prop3-primacy", f"{L}.layer2_scores", "layer-2 closed form with the key order reversed",
           w.layer2_transposed, ("kim-prop-3",)),
    Mutant("inputs-isotropic", f"{L}.sample_inputs", "inputs drawn without the shared component (alpha "
           "ignored)", w.inputs_isotropic, ("kim-prop-3", "kim-fig-1"), fresh=True),
    # kim-fig-1
    Mutant("rp-reversed", f"{L}.recency_probability", "recency probability counts early-token preference",
           w.rp_reversed, ("kim-fig-1",)),
    Mutant("fig1-uniform-layer1", f"{L}.noln_mean_field", "uniform layer-1 weights in the mean field",
           w.uniform_layer1, ("kim-fig-1",)),
    Mutant("fig1-residual-sigma-one", f"{L}.layer2_scores", "residual sigma 1", w.residual_sigma1, ("kim-fig-1",)),
    Mutant("gram-plus-identity", f"{L}.layer2_scores", "layer-2 closed form with the Gram matrix r + I "
           "instead of r + (1 - r) I", w.gram_plus_identity, ("kim-fig-1",)),
    # kim-fig-2
    Mutant("fig2-fisher-sign", f"{L}.layer1_offdiag_moments", "Fisher correction with the wrong sign",
           w.fisher_sign, ("kim-fig-2",)),
    Mutant("fig2-residual-sigma-one", f"{L}.layer2_scores", "residual sigma 1", w.residual_sigma1, ("kim-fig-2",)),
    # kim-beyond-rope
    Mutant("rope-layer1-sin", f"{L}.rope_layer1_scores", "RoPE layer-1 closed form with |sin| for cos",
           w.rope_layer1_sin, ("kim-beyond-rope",)),
    Mutant("expansion-no-var", f"{L}.expansion_parameter", "expansion parameter without the log-normal term",
           w.expansion_no_var, ("kim-beyond-rope",)),
    Mutant("mean-field-decay-half", f"{L}.noln_mean_field", "mean field with half the decay rate",
           w.mean_field_decay_sign, ("kim-beyond-rope",)),
    Mutant("rope-base-tenth", f"{A}.rope_angles", "RoPE angles with a tenth of the base", w.rope_angles_base,
           ("kim-beyond-rope",)),
    # wu-what-networks-learned
    Mutant("sweep-ceiling-no-collisions", "posbias.science.retrieval.max_count_mean", "the most frequent of N labels "
           "counted once, as if no two classes shared a label", w.max_count_one, ("wu-what-networks-learned",)),
    Mutant("copy-slot-as-random", "posbias.science.retrieval.closed_forms", "the best fixed slot's closed form taken "
           "as a random slot's", w.copy_slot_as_random, ("wu-what-networks-learned",)),
    Mutant("ic-sets-without-copy", "posbias.science.task.ic_test_set", "IC test sets without the planted copy of the "
           "correct item", w.ic_sets_without_copy, ("wu-what-networks-learned",)),
    # closed forms a page shows (issue 96)
    # wu-thm-4-1
    Mutant("logit-bound-doubled", f"{A}.random_attention_stack", "logit bound 2 C^2/sqrt(d) (twice A1-A2's)",
           wc.logit_bound_doubled, ("wu-thm-4-1", "wu-thm-4-5")),
    Mutant("logit-bound-halved", f"{A}.random_attention_stack", "logit bound C^2/(2 sqrt(d)) (half A1-A2's)",
           wc.logit_bound_halved, ("wu-thm-4-1", "wu-thm-4-5")),
    Mutant("center-reversed-causal", f"{M}.center_nodes", "center nodes: the tokens that reach every token",
           w.center_reversed, ("wu-thm-4-1",)),
    # wu-thm-4-3
    Mutant("attention-no-sqrt-d", f"{A}.attention_weights", "logits q k^T without the 1/sqrt(d)",
           wc.attention_no_sqrt_d, ("wu-thm-4-3",)),
    Mutant("prefix-one-ahead", f"{M}.prefix_mask", "prefix tokens see one position ahead, not the whole prefix",
           wc.prefix_one_ahead, ("wu-thm-4-3",)),
    # wu-thm-4-5
    Mutant("stirling-returns-kappa", f"{T}.decay_critical_distance_stirling", "Stirling root (L-1)/(e^m-1) - 1 "
           "(kappa, not kappa + 1)", wc.stirling_returns_kappa, ("wu-thm-4-5",)),
    # wu-thm-4-7
    Mutant("slowest-angle-one-past", f"{T}.rope_slowest_angle", "slowest angle 1/base: pair d/2, one past the last",
           wc.slowest_angle_one_past, ("wu-thm-4-7",)),
    Mutant("kstar-depth-plus-one", f"{T}.decay_critical_distance", "decay k* of L + 1 layers",
           wc.kstar_depth_plus_one, ("wu-thm-4-7",)),
    # kim-thm-1 (issue 96 item 3: closed-form numbers asserted)
    Mutant("thm1-layer2-float32", f"{L}.layer2_scores", "layer-2 closed form evaluated in single precision",
           wc.layer2_float32, ("kim-thm-1",)),
    Mutant("thm1-paper-weights-lognormal", f"{L}.layer1_log_weights", "the paper's weights (finite_d=False) "
           "given the log-normal factor: D_j built from our mean weights", wc.paper_weights_lognormal, ("kim-thm-1",)),
    Mutant("sketch-linear", f"{L}.uniform_sketch", "uniform-averaging sketch with cosines j/i, not sqrt(j/i)",
           wc.sketch_linear, ("kim-thm-1",)),
    # kim-prop-2
    Mutant("residual-sigma-isotropic", f"{L}.layer2_scores", "residual sigma 1/sqrt(d): the anisotropy's "
           "(1 - alpha) dropped", wc.residual_sigma_isotropic, ("kim-prop-2",)),
    Mutant("prop2-paper-weights-lognormal", f"{L}.layer1_log_weights", "the paper's weights (finite_d=False) "
           "given the log-normal factor", wc.paper_weights_lognormal, ("kim-prop-2",)),
    # kim-fig-1
    Mutant("fig1-slope-factor-sign", f"{L}.alpha0_slope_factor", "next-order factor 1 - 1/sqrt(d) + 2/d",
           w.slope_factor_sign, ("kim-fig-1",)),
    # kim-fig-2
    Mutant("gram-without-fisher", f"{L}.layer2_scores", "layer-2 closed form with the Gram matrix's r = alpha, "
           "the Fisher mean E r dropped", wc.gram_without_fisher, ("kim-fig-2",)),
    Mutant("lognormal-weight-full-var", f"{L}.layer1_log_weights", "layer-1 weight e^{m + v} instead of the "
           "log-normal mean e^{m + v/2}", wc.lognormal_weight_full_var, ("kim-fig-2",)),
    Mutant("lognormal-var-unsquared", f"{L}.layer1_offdiag_moments", "log-normal variance 1 - alpha^2, not "
           "(1 - alpha^2)^2", wc.lognormal_var_unsquared, ("kim-fig-2",)),
    # kim-beyond-rope
    Mutant("noln-variance-no-shared", f"{L}.noln_score_variance", "score variance over keys 1/d^2: the query's "
           "shared l u dropped", wc.noln_variance_no_shared, ("kim-beyond-rope",)),
]

BY_ID = {m.id: m for m in MUTANTS}
assert len(BY_ID) == len(MUTANTS), "mutant ids must be unique"
