"""Every chapter declares its parameters once; the parameters cell mirrors them; validation refuses bad input."""
import ast
import re

import jupytext
import pytest

from posbias.book.chapters import PROFILES, ParamError, chapter_ids, get_chapter
from posbias.storage.provenance import ROOT

CHAPTERS = chapter_ids()


def test_there_are_chapters():
    assert "wu-thm-4-1" in CHAPTERS


@pytest.mark.parametrize("cid", CHAPTERS)
def test_parameters_cell_mirrors_the_declaration(cid):
    ch = get_chapter(cid)
    nb = jupytext.read(ch.path)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    cells = [c for c in nb.cells if c.cell_type == "code" and "parameters" in c.metadata.get("tags", [])]
    assert len(cells) == 1, f"{cid}: exactly one cell tagged 'parameters'"
    first_code = next(c for c in nb.cells if c.cell_type == "code")
    assert first_code is cells[0], f"{cid}: the parameters cell is the first code cell"
    assigned = {}
    for node in ast.parse(cells[0].source).body:
        assert isinstance(node, ast.Assign) and len(node.targets) == 1, f"{cid}: only plain assignments"
        assigned[node.targets[0].id] = ast.literal_eval(node.value)
    declared = {n: p.default for n, p in ch.params.items()}
    assert assigned == declared, f"{cid}: parameters cell differs from the header declaration"


@pytest.mark.parametrize("cid", CHAPTERS)
def test_every_profile_resolves(cid):
    ch = get_chapter(cid)
    for prof in ch.profile_names():
        values = ch.resolve(prof)
        assert set(values) == set(ch.params)                 # every parameter, nothing else
        for name, v in values.items():                       # each value already in its declared type
            assert ch.params[name].coerce(v) == v
        for name, v in ch.profiles.get(prof, {}).items():    # the profile's own values win over the defaults
            assert values[name] == ch.params[name].coerce(v)


def test_unknown_chapter_names_the_choices():
    with pytest.raises(ParamError, match="unknown chapter 'wu-thm-4-9'.*wu-thm-4-1"):
        get_chapter("wu-thm-4-9")


@pytest.mark.parametrize("overrides, pattern", [
    ({"n_tokens": "-3"}, r"n_tokens.*below the minimum.*\[3, 2048\]"),
    ({"n_tokens": "abc"}, r"n_tokens.*expected an integer"),
    ({"n_tokens": "3.5"}, r"n_tokens.*expected an integer"),
    ({"nonsense": "1"}, r"no parameter 'nonsense'.*n_tokens"),
    ({"n_tokenz": "5"}, r"did you mean 'n_tokens'"),
    ({"n_grid": "8,1"}, r"n_grid.*below the minimum"),
    ({"n_grid": ""}, r"n_grid.*empty"),
    ({"weight_norm": "nan"}, r"weight_norm.*finite"),
    ({"weight_norm": "9"}, r"weight_norm.*above the maximum"),
])
def test_refusals(overrides, pattern):
    with pytest.raises(ParamError, match=pattern):
        get_chapter("wu-thm-4-1").resolve("default", overrides)


def test_types_are_parsed():
    p = get_chapter("wu-thm-4-1").resolve("default", {"n_tokens": "64", "n_grid": "8,16", "weight_norm": "0.5"})
    assert p["n_tokens"] == 64 and p["n_grid"] == [8, 16] and p["weight_norm"] == 0.5
    assert get_chapter("wu-thm-4-1").resolve("default", {"n_grid": "[4, 5]"})["n_grid"] == [4, 5]


def test_constraints_refuse_impossible_combinations():
    from posbias.book.chapters import Chapter, Param

    ch = Chapter("x", None, "x", {"n": Param("n", "int", 8, "tokens", 1), "w": Param("w", "int", 4, "window", 1)},
                 {}, [{"rule": "w <= n", "message": "a window cannot be wider than the sequence"}])
    assert ch.resolve("default", {"w": "8"})["w"] == 8
    with pytest.raises(ParamError, match=r"w = 9, n = 8 violates `w <= n`: a window cannot be wider"):
        ch.resolve("default", {"w": "9"})


def test_constraint_language_is_restricted():
    from posbias.book.chapters import compile_rule

    with pytest.raises(ValueError):
        compile_rule("__import__('os').system('true')")
    with pytest.raises(ValueError):
        compile_rule("n.__class__")


@pytest.mark.parametrize("cid, overrides, pattern", [
    # window wider than N
    ("wu-center-nodes", {"n_tokens": "8", "window": "9"}, r"window = 9, n_tokens = 8.*must fit in the sequence"),
    ("wu-center-nodes", {"window": "0"}, r"window.*below the minimum"),                          # a window of 0
    ("wu-center-nodes", {"n_tokens": "8", "prefix": "8"}, r"prefix = 8.*must fit in the sequence"),  # K >= N
    ("wu-thm-4-3", {"n_grid": "8,16", "k_grid": "8"}, r"prefix must be shorter than the sequence"),
    ("wu-thm-4-7", {"d_model": "63"}, r"RoPE needs an even width"),                               # odd RoPE width
    ("kim-beyond-rope", {"d": "15"}, r"d must be even"),
    ("wu-fig-2", {"seeds": ""}, r"seeds.*empty"),                                                # zero seeds
    ("wu-fig-2", {"steps": "10", "eval_every": "10"}, r"evaluate at least twice"),
    ("sinks-streaming", {"sinks": "1,2"}, r"window-only cache"),
    ("sinks-streaming", {"sinks": "0"}, r"add a sink count k of at least 1"),
    ("sinks-streaming", {"smooth": "512"}, r"lower smooth or lengthen n_stream"),    # 511 tokens predicted
    # 4 tokens predicted after the largest cache (32 + 4) evicts, the fewest a standard error is taken from
    ("sinks-streaming", {"n_stream": "40", "windows": "32", "sinks": "0,4"}, r"at least 5 tokens"),
    # make fuzz: gu_n 8 failed no-sink-repeated (exit 3): uniform causal attention gives token 1 H_8/8 = 0.34 > eps
    ("sinks-real-decoder", {"gu_n": "8"}, r"eps must exceed H_n / n"),
    ("sinks-real-decoder", {"eps": "0.05"}, r"eps must exceed H_n / n"),                     # H_64/64 = 0.074
])
def test_impossible_combinations_in_real_chapters_are_refused(cid, overrides, pattern):
    """The refusals issue 8 names, on the chapters that declare them (the CLI turns each into exit 2)."""
    with pytest.raises(ParamError, match=pattern):
        get_chapter(cid).resolve("default", overrides)


@pytest.mark.parametrize("cid", CHAPTERS)
def test_every_chapter_declares_a_cost_model_that_evaluates_in_every_profile(cid):
    """The front matter's cost model (posbias.book.cost) gives a positive, finite estimate for every profile,
    names its calibration, and the smoke profile (seconds-scale, for CI) is estimated under ten minutes."""
    import math

    from posbias.book import cost

    ch = get_chapter(cid)
    model = ch.meta.get("cost") or {}
    assert {"seconds", "memory_mb", "calibration"} <= set(model), \
        f"{cid}: declare cost: seconds, memory_mb, calibration"
    est = {prof: cost._eval(ch, "seconds", ch.resolve(prof)) for prof in ch.profile_names()}
    mem = {prof: cost._eval(ch, "memory_mb", ch.resolve(prof)) for prof in ch.profile_names()}
    for prof in ch.profile_names():
        assert 0 < est[prof] < math.inf and 0 < mem[prof] < math.inf, (cid, prof, est[prof], mem[prof])
    assert est["smoke"] < 600, est


def test_an_undeclared_converged_profile_is_refused():
    ch = get_chapter("wu-fig-2")
    assert "converged" in PROFILES and "converged" not in ch.profile_names()
    with pytest.raises(ParamError, match="no 'converged' profile"):
        ch.resolve("converged")


def test_a_cost_block_with_unknown_keys_or_unsafe_expressions_is_refused(tmp_path, monkeypatch):
    import re

    from posbias.book import chapters

    text = (chapters.NOTEBOOKS / "wu-thm-4-1.md").read_text()
    monkeypatch.setattr(chapters, "NOTEBOOKS", tmp_path)
    for bad, message in (('    seconds: "1"\n    flops: "1"', "cost declares"),
                         ("    seconds: \"__import__('os')\"", "not allowed|calls something")):
        (tmp_path / "zz-bad.md").write_text(re.sub(r"^    seconds: .*$", lambda m: bad, text, count=1, flags=re.M))
        chapters._load.cache_clear()
        with pytest.raises(ValueError, match=message):
            chapters._load("zz-bad")
    chapters._load.cache_clear()


def test_a_constraint_may_use_a_generator_expression_over_the_parameters():
    from pathlib import Path

    from posbias.book.chapters import Chapter, Param

    ch = Chapter("zz", Path("zz.md"), "zz",
                 {"n": Param("n", "int", 8, "n"), "ws": Param("ws", "int_list", [2, 4], "ws")},
                 {}, constraints=[{"rule": "all(w <= n for w in ws)", "message": "windows fit"}])
    assert ch.resolve(overrides={"ws": "2,8"})["ws"] == [2, 8]
    with pytest.raises(ParamError, match="windows fit"):
        ch.resolve(overrides={"ws": "2,9"})


def test_the_sink_threshold_constraint_is_the_uniform_share_of_token_one():
    """sinks-real-decoder refuses exactly where H_n/n >= eps: at eps 0.3, n = 9 (0.314) is refused and
    n = 10 (0.293) accepted; H_n summed by hand."""
    ch = get_chapter("sinks-real-decoder")
    h = lambda n: sum(1 / k for k in range(1, n + 1)) / n  # noqa: E731
    assert h(9) > 0.3 > h(10)
    with pytest.raises(ParamError, match="H_n / n"):
        ch.resolve("smoke", {"gu_n": "9"})
    assert ch.resolve("smoke", {"gu_n": "10"})["gu_n"] == 10
    over = {"gu_n": "64", "lengths": "48"}
    assert ch.resolve("smoke", {**over, "eps": f"{h(48) + 1e-6}"})["lengths"] == [48]   # 48 binds
    with pytest.raises(ParamError, match="H_n / n"):
        ch.resolve("smoke", {**over, "eps": f"{h(48) - 1e-6}"})


def test_empty_items_duplicates_and_long_numbers_are_refused_in_a_few_words():
    from posbias.book.chapters import Param

    grid = Param("d_list", "int_list", [16, 64], "widths", 4, 4096, unique=True, max_len=3)
    with pytest.raises(ParamError, match="empty item"):
        grid.coerce("16,,64")
    with pytest.raises(ParamError, match="empty item"):
        grid.coerce("16,64,")
    with pytest.raises(ParamError, match=r"\[16\] given more than once"):
        grid.coerce("[16, 16]")
    with pytest.raises(ParamError, match="4 items, more than 3"):
        grid.coerce("4,8,16,32")
    assert grid.coerce("16,64") == [16, 64] and grid.coerce(" 16 ") == [16]
    assert Param("a", "int_list", [1], "a", 0).coerce("[0, 0]") == [0, 0]        # not declared unique
    seed = Param("seed", "int", 0, "seed", 0, 2**32 - 1)
    for raw in ("7" * 5000, 7 ** 6000):
        with pytest.raises(ParamError) as e:
            seed.coerce(raw)
        assert len(str(e.value)) < 300, len(str(e.value))


def test_the_shortest_stream_streaming_takes_predicts_four_tokens_after_eviction():
    p = get_chapter("sinks-streaming").resolve("smoke", {"n_stream": "41", "windows": "32", "sinks": "0,4"})
    assert p["n_stream"] - 1 - (max(p["windows"]) + max(p["sinks"])) == 4


def test_duplicates_are_refused_where_a_chapter_declares_them_unique():
    with pytest.raises(ParamError, match="given more than once"):
        get_chapter("sinks-streaming").resolve("smoke", {"sinks": "[0, 0]"})
    with pytest.raises(ParamError, match="empty item"):
        get_chapter("kim-fig-1").resolve("smoke", {"d_list": "16,,64"})


# --------------------------------------------------------------------------- figure captions: one source

def test_figure_captions_are_the_directive_bodies_without_options():
    from posbias.book.chapters import figure_captions

    text = """---
title: "```{glue:figure} not-in-the-header"
---
# A chapter

```{code-cell} ipython3
figures.save(fig, "a")
```

```{glue:figure} a
:name: fig-a
:figwidth: 80%

Mass on position 1 after {glue:text}`n_layers` layers, $P^{(t)}_{i1} \\to 1$;
  the bound
(dotted).
```

Prose between.

````{admonition} A note
```{glue:figure} b
---
name: fig-b
---
Nested in a note.
```
````

```python
```{glue:figure} not-a-directive-in-a-code-block
```

:::{glue:figure} c
:name: fig-c
With colons.
:::

```{glue:figure} d
```
"""
    assert figure_captions(text) == {
        "a": "Mass on position 1 after {glue:text}`n_layers` layers, $P^{(t)}_{i1} \\to 1$; the bound (dotted).",
        "b": "Nested in a note.", "c": "With colons.", "d": ""}


def test_figure_captions_refuse_a_name_given_twice_or_none():
    from posbias.book.chapters import figure_captions

    with pytest.raises(ValueError, match=r"x.md: two ```\{glue:figure\} a directives"):
        figure_captions("```{glue:figure} a\none\n```\n\n```{glue:figure} a\ntwo\n```\n", "x.md")
    with pytest.raises(ValueError, match=r"x.md, line 2: ```\{glue:figure\} takes one figure name"):
        figure_captions("text\n```{glue:figure}\n:name: x\n```\n", "x.md")


def _saved_figures(nb) -> list[tuple[str, ast.Call]]:
    """Every ``figures.save(...)`` call in the notebook's code cells, with the name it saves."""
    calls = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        src = "\n".join("" if ln.lstrip().startswith(("%", "!")) else ln for ln in cell.source.splitlines())
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "figures.save":
                name = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords
                                                                     if k.arg == "name"), None)
                calls.append((name.value if isinstance(name, ast.Constant) else ast.unparse(name), node))
    return calls


@pytest.mark.parametrize("cid", CHAPTERS)
def test_each_figure_has_one_caption_its_directive(cid):
    """A caption is written once, in the ``{glue:figure}`` directive: no ``figures.save`` passes
    ``caption=``, every name saved is a string with a directive, and every directive a saved figure."""
    ch = get_chapter(cid)
    saved = _saved_figures(jupytext.read(ch.path))
    for name, call in saved:
        assert not any(k.arg == "caption" for k in call.keywords), \
            f"{cid}: figures.save({name!r}, caption=...): the caption is the {{glue:figure}} directive's body"
    names = [name for name, _ in saved]
    assert len(names) == len(set(names)), f"{cid}: a figure saved twice: {names}"
    assert sorted(names) == sorted(ch.captions), \
        f"{cid}: figures saved {sorted(names)}, {{glue:figure}} directives {sorted(ch.captions)}"
    assert all(ch.captions.values()), f"{cid}: a {{glue:figure}} directive without a caption"


@pytest.mark.parametrize("cid", CHAPTERS)
def test_shown_code_fits_the_page_column(cid):
    """The book build's page scan (tests/test_pages.py) refuses a shown code line over
    MAX_CODE_LINE characters; this catches the same line in the source, without a build."""
    from test_pages import MAX_CODE_LINE
    nb = jupytext.read(get_chapter(cid).path)
    long = [line for c in nb.cells if c.cell_type == "code"
            and not {"remove-input", "remove-cell"} & set(c.metadata.get("tags", []))
            for line in c.source.splitlines() if len(line) > MAX_CODE_LINE]
    assert not long, f"{cid}: shown code lines over {MAX_CODE_LINE} characters: {long}"


def bare_glue_outputs(sources: list[str]) -> list[str]:
    """Of code cell sources, the last statements that are a ``report.value(...)`` call not followed by
    ``;``: the call returns its value, which the page then publishes as a bare number."""
    found = []
    for cell in sources:
        try:
            tree = ast.parse(cell)
        except SyntaxError:
            continue
        last = tree.body[-1] if tree.body else None
        if isinstance(last, ast.Expr) and isinstance(last.value, ast.Call) \
                and ast.unparse(last.value.func) == "report.value":
            after = cell.splitlines()[last.end_lineno - 1][last.end_col_offset:].lstrip()
            if not after.startswith(";"):
                found.append(ast.unparse(last))
    return found


@pytest.mark.parametrize("cid", chapter_ids())
def test_no_cell_publishes_a_bare_glue_value(cid):
    """The page scan (tests/test_pages.py) refuses a bare-number output; a glue cell ending in
    ``report.value(...)`` without ``;`` makes one. Caught here in the source, without a build."""
    nb = jupytext.read(get_chapter(cid).path)
    cells = [c.source for c in nb.cells if c.cell_type == "code" and "remove-cell" not in c.metadata.get("tags", [])]
    assert not bare_glue_outputs(cells), f"{cid}: glue cells that publish their value: {bare_glue_outputs(cells)}"


def test_bare_glue_outputs_finds_the_missing_semicolon():
    assert bare_glue_outputs(['report.value("a", 1)\nreport.value("b", int(x.sum()))']) == \
        ["report.value('b', int(x.sum()))"]
    assert bare_glue_outputs(['report.value("b", 2);', 'x = report.value("c", 3)',
                              'report.check("n", "c",\n  1, 2, True)', 'report.value("d", 4);  # glued',
                              'report.value("e",\n  5);']) == []
    assert bare_glue_outputs(['report.value("f", 6)  # a comment is no semicolon']) == ['report.value(\'f\', 6)']


GLUE_FROM_ANOTHER_PAGE = re.compile(r"\{glue:(?:text|md)\}`([^`]*::[^`]*)`")


def test_a_value_glued_from_another_page_names_its_format():
    """myst-nb splits a glue role's text at its last ':' for a format spec, so ``path::key`` without
    one reads the key as ``path:`` and the build warns; ``path::key:s`` (or ``:d``, ...) is needed."""
    pages = sorted((ROOT / "book").glob("*.md")) + sorted((ROOT / "notebooks").glob("*.md"))
    bare = [f"{p.name}: {m}" for p in pages for m in GLUE_FROM_ANOTHER_PAGE.findall(p.read_text(encoding="utf-8"))
            if ":" not in m.split("::", 1)[1]]
    assert not bare, f"glue from another page without a format spec (add ':s'): {bare}"
