"""posbias.analysis.learned: standings of stored networks and the sentences the pages print, on synthetic results."""
from posbias.science import retrieval
from posbias.analysis import learned

EXACT = retrieval.closed_forms()


def _res(ic, sweep, n_test=10000, n_sweep=2000):
    return {"ic_accuracy": {f"IC_{i}": ic for i in range(6)}, "sweep_accuracy": [sweep] * 8,
            "params": {"n_test": n_test, "n_sweep": n_sweep}}


def test_standings_and_the_closest_strategy():
    stored = {"Figure 2": {"No PE|2": [_res(0.515, 0.16)] * 3 + [None], "RoPE|2": [None]},
              "Figure 4": {"first|full|sin": [_res(0.632, 0.153)] * 2},
              "residual study": {"No PE|6": [_res(0.95, 0.45)] * 5}}
    rows = learned.standings(stored, EXACT)
    assert [(s.figure, s.label, s.networks) for s in rows] == [
        ("Figure 2", "No PE|2", 3), ("Figure 4", "first|full|sin", 2), ("residual study", "No PE|6", 5)]
    assert [s.closest for s in rows] == ["copy_random", "copy_slot", "ignore_best"]
    assert rows[0].readings == {"retrieves": 0, "between": 0, "ignores the query": 3}
    assert rows[2].mostly_retrieves and not rows[0].mostly_retrieves
    table = learned.standing_table(rows)
    assert table[0]["retrieve / between / ignore"] == "0 / 0 / 3" and table[0]["IC accuracy"].startswith("0.515")
    assert [t["scores like"] for t in table] == ["copy_random", "copy_slot", "retrieval (most networks)"]
    words = learned.others_sentence(rows)
    assert "Figure 4: " not in words and "residual study: No PE|6" in words
    assert "1 score what copying the label at one fixed slot scores" in learned.others_sentence(rows)


def test_the_figure_2_sentence_says_what_the_numbers_say():
    none = learned.standings({"Figure 2": {"a": [_res(0.50, 0.15)], "b": [_res(0.52, 0.17)]}}, EXACT)
    text = learned.fig2_sentence(none, EXACT)
    assert text.startswith("None of the 2 Figure 2 networks")
    assert "at most 0.004 above" in text and "none exceeds the 0.208" in text
    below = learned.standings({"Figure 2": {"a": [_res(0.50, 0.15)]}}, EXACT)
    assert "sit at or below" in learned.fig2_sentence(below, EXACT)
    some = learned.standings({"Figure 2": {"a": [_res(0.90, 0.60)], "b": [_res(0.52, 0.17)]}}, EXACT)
    assert learned.fig2_sentence(some, EXACT).startswith("1 of the 2 Figure 2 networks")
    assert learned.fig2_sentence([], EXACT) == "No Figure 2 network is stored yet."


def test_the_jump_sentence_reads_only_the_networks_that_left_the_copier():
    study = [_res(0.53, 0.14), _res(0.74, 0.22), _res(0.745, 0.216), None]
    text = learned.jump_sentence(study, EXACT, 1.0)
    assert text.startswith("the 2 networks that jumped end at mean IC accuracy 0.740 to 0.745")
    assert learned.jump_sentence([_res(0.53, 0.14)], EXACT, 1.0) == "no network of the study left the plateau"
