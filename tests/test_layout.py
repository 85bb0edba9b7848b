"""The house: the module map in CONTRIBUTING.md names every module of posbias/, and nothing that is not
one; every module names its one job in its docstring's first line."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_module_map_lists_every_module():
    text = (ROOT / "CONTRIBUTING.md").read_text().split("## The module map", 1)[1]
    listed = set(re.findall(r"^\| `([\w/<>]+)` \|", text, flags=re.M))
    modules = {p.relative_to(ROOT / "posbias").with_suffix("").as_posix()
               for p in (ROOT / "posbias").rglob("*.py") if p.name != "__init__.py"}
    # a trained chapter's declaration is its own (issue 97: a chapter declared once): one row covers them all
    assert "trained/<id>" in listed
    modules = {"trained/<id>" if m.startswith("trained/") else m for m in modules}
    # a package whose __init__ defines functions (not only re-exports) is a module of its own
    modules |= {p.parent.relative_to(ROOT / "posbias").as_posix() for p in (ROOT / "posbias").rglob("__init__.py")
                if p.parent != ROOT / "posbias" and "\ndef " in p.read_text()}
    assert modules - listed == set(), f"modules missing from CONTRIBUTING.md's map: {sorted(modules - listed)}"
    assert listed - modules == set(), f"the map names modules that do not exist: {sorted(listed - modules)}"


def test_every_module_names_its_one_job_in_its_first_line():
    """Split by concern, not by count (issue 97): there is no line cap, which had become a target (nine modules
    at 400-499 lines). Every module of the library and of its tests opens with a docstring whose first line
    (one line, at most 120 characters) names the one job it does; a module that needs two such lines is two."""
    import ast

    for folder in ("posbias", "tests"):
        for p in sorted((ROOT / folder).rglob("*.py")):
            if p.name == "__init__.py" and not p.read_text().strip():
                continue
            doc = ast.get_docstring(ast.parse(p.read_text()))
            first = doc.strip().splitlines()[0] if doc else ""
            rel = p.relative_to(ROOT).as_posix()
            assert first, f"{rel}: no docstring naming its job"
            assert len(first) <= 120, f"{rel}: its first line is {len(first)} characters, not one job"


# ----------------------------------------------------------------------------- layers and imports (issue 97)

#: The layers, bottom up: a module imports only modules of its own layer or of a layer before it.
LAYERS = ["science", "storage", "measures", "llm", "trained", "training", "analysis", "figures", "book"]
#: Edges that still run upward, each with its reason. The test fails when one of them disappears, so the list
#: only shrinks, and when any other appears.
UPWARD = {
    ("posbias.training.campaigns", "posbias.analysis.budget"):
        "a unit of the fixed-budget study is admitted from a converged record by the study's own rule "
        "(budget.admitted), which the campaign applies when it lists what is stored",
    ("posbias.training.campaigns", "posbias.book.chapters"):
        "a chapter's campaign is resolved from its front matter (get_chapter): the parameters reach training "
        "as a chapter's, not yet as one typed configuration (issue 97, item 2)",
}
#: What the science core may import beside itself and the standard library.
SCIENCE_MAY_IMPORT = {"torch", "numpy", "scipy"}


def _modules() -> dict[str, Path]:
    out = {}
    for p in (ROOT / "posbias").rglob("*.py"):
        parts = list(p.relative_to(ROOT).with_suffix("").parts)
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


def _imports(path: Path, name: str, modules: dict[str, Path]) -> tuple[set[str], set[str]]:
    """Every module of posbias that importing ``name`` (at ``path``) can run, at any depth of its code (lazy
    imports and ``TYPE_CHECKING`` blocks included), each package whose ``__init__`` that runs on the way (not
    ``name``'s own ancestors, already imported); and the top-level names of every other import."""
    import ast

    is_pkg = path.name == "__init__.py"
    inner, outer = set(), set()
    for node in ast.walk(ast.parse(path.read_text())):
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = name.split(".") if is_pkg else name.split(".")[:-1]
                here = here[: len(here) - node.level + 1]
                base = ".".join(here + ([node.module] if node.module else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        for t in targets:
            if not t.startswith("posbias"):
                outer.add(t.split(".")[0])
                continue
            while t not in modules:
                t = t.rsplit(".", 1)[0]
            parts = t.split(".")
            for i in range(2, len(parts) + 1):
                step = ".".join(parts[:i])
                if step != name and (i == len(parts) or not name.startswith(step + ".")):
                    inner.add(step)
    return inner, outer


def _graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    modules = _modules()
    inner, outer = {}, {}
    for name, path in modules.items():
        inner[name], outer[name] = _imports(path, name, modules)
    return inner, outer


def test_no_import_cycle_counting_lazy_imports_and_package_inits():
    """No module of posbias can reach itself through imports, counting imports inside functions and the package
    ``__init__`` each import runs on the way (a cycle a top-level scan misses: ``training.status -> cost ->
    training`` was one until issue 97)."""
    inner, _ = _graph()
    index, low, stack, on, cycles = {}, {}, [], set(), []

    def visit(v: str) -> None:                              # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in inner[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(inner):
        if v not in index:
            visit(v)
    assert cycles == [], f"import cycles: {cycles}"


def test_the_graph_sees_lazy_imports_and_package_inits(tmp_path):
    """The scan itself: a lazy import and the ``__init__`` of a package imported from outside it are edges."""
    (tmp_path / "a.py").write_text("def f():\n    from posbias.pkg import b\n")
    (tmp_path / "b.py").write_text("")
    modules = {"posbias.a": tmp_path / "a.py", "posbias.pkg": tmp_path / "i.py", "posbias.pkg.b": tmp_path / "b.py"}
    assert _imports(tmp_path / "a.py", "posbias.a", modules)[0] == {"posbias.pkg", "posbias.pkg.b"}


def test_the_science_core_imports_only_torch_numpy_scipy_and_itself():
    """The thin core stands alone: a reader can lift ``posbias/science`` out with torch, numpy and scipy."""
    import sys

    inner, outer = _graph()
    for name in inner:
        if name == "posbias.science" or name.startswith("posbias.science."):
            assert {t for t in inner[name] if not t.startswith("posbias.science")} == set(), name
            assert outer[name] - SCIENCE_MAY_IMPORT - set(sys.stdlib_module_names) - {"__future__"} == set(), name


def test_each_layer_imports_only_the_layers_before_it():
    """Every import between layers runs downward (:data:`LAYERS`), save the edges of :data:`UPWARD`, each named
    with its reason; an entry of :data:`UPWARD` that no longer exists is an error too, so the list only shrinks."""
    inner, _ = _graph()
    layers = {p.name for p in (ROOT / "posbias").iterdir() if (p / "__init__.py").exists()}
    assert layers == set(LAYERS), f"subpackages of posbias not placed in LAYERS: {sorted(layers ^ set(LAYERS))}"
    outside = {m for m in inner if m.count(".") == 1 and m.split(".")[1] not in LAYERS}
    assert outside == set(), f"modules outside every layer: {sorted(outside)}"
    rank = {layer: i for i, layer in enumerate(LAYERS)}
    up = {(a, b) for a, targets in inner.items() if a != "posbias" for b in targets
          if b != "posbias" and rank[b.split(".")[1]] > rank[a.split(".")[1]]}
    up -= {(a, ".".join(b.split(".")[:2])) for a, b in up if b.count(".") > 1}    # the layer's __init__ on the way
    assert up - set(UPWARD) == set(), f"imports that run upward: {sorted(up - set(UPWARD))}"
    assert set(UPWARD) - up == set(), f"UPWARD names edges that no longer exist: {sorted(set(UPWARD) - up)}"


#: Figure modules that still reach below the figures for something to compute, each with its reason; every other
#: module of ``posbias.figures`` draws what it is given. The test fails when an entry no longer reaches down, so
#: the list only shrinks.
FIGURES_COMPUTE = {
    "posbias.figures.wu": "reads labels, sweeps and attention maps through posbias.measures.evaluate (issue 97, "
                          "item 2: one typed configuration replaces the parsed labels)",
    "posbias.figures.schematics": "the schematics compute their masks, rollouts and closed forms from the science core",
    "posbias.figures.saving": "a saved figure's provenance lists the data files it drew (posbias.analysis.evidence) "
                              "and the run's record (posbias.storage)",
}


def test_figures_draw_what_they_are_given():
    """A figure module imports nothing of posbias but the figures package itself (save those named in
    :data:`FIGURES_COMPUTE`): what it draws is computed before and handed to it."""
    inner, _ = _graph()
    figs = {m for m in inner if m.startswith("posbias.figures.")}
    reach = {m: {t for t in inner[m] if t != "posbias" and not t.startswith("posbias.figures")} for m in figs}
    assert {m for m, r in reach.items() if r} - set(FIGURES_COMPUTE) == set(), \
        {m: sorted(r) for m, r in reach.items() if r and m not in FIGURES_COMPUTE}
    assert {m for m in FIGURES_COMPUTE if not reach.get(m)} == set(), "FIGURES_COMPUTE names a module that draws only"


def test_book_holds_pages_and_run_records_live_with_the_data():
    """``book/`` holds the book's own pages (Markdown) only; the test suite's run records (mutmut's runs, the kill
    table) are committed in ``data/mutants/`` beside the results (issue 97, item 5)."""
    import subprocess

    tracked = subprocess.run(["git", "ls-files", "book"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    assert tracked and all(f.endswith(".md") for f in tracked), [f for f in tracked if not f.endswith(".md")]
    assert (ROOT / "data" / "mutants" / "teeth.json").exists()
