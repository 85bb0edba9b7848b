"""The house: the module map in CONTRIBUTING.md names every module of posbias/, and nothing that is not
one; no module, of the library or of its tests, is over 500 lines."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_module_map_lists_every_module():
    text = (ROOT / "CONTRIBUTING.md").read_text().split("## The module map", 1)[1]
    listed = set(re.findall(r"^\| `([\w/]+)` \|", text, flags=re.M))
    modules = {p.relative_to(ROOT / "posbias").with_suffix("").as_posix()
               for p in (ROOT / "posbias").rglob("*.py") if p.name != "__init__.py"}
    # a package whose __init__ defines functions (not only re-exports) is a module of its own
    modules |= {p.parent.relative_to(ROOT / "posbias").as_posix() for p in (ROOT / "posbias").rglob("__init__.py")
                if p.parent != ROOT / "posbias" and "\ndef " in p.read_text()}
    assert modules - listed == set(), f"modules missing from CONTRIBUTING.md's map: {sorted(modules - listed)}"
    assert listed - modules == set(), f"the map names modules that do not exist: {sorted(listed - modules)}"


def test_no_module_over_500_lines():
    """One concern a module: a module that outgrows 500 lines is split into a package (as llm/, figures/,
    training/ and claims/ were), not allowed to grow. The tests too: a test module over 500 lines is split
    by what it tests (as test_training*.py and test_llm*.py were), a catalogue from its helpers."""
    for folder, at_least in (("posbias", 20), ("tests", 20)):
        sizes = {p.relative_to(ROOT).as_posix(): len(p.read_text().splitlines())
                 for p in (ROOT / folder).rglob("*.py")}
        over = {path: n for path, n in sizes.items() if n > 500}
        assert len(sizes) > at_least and over == {}, f"modules over 500 lines: {over}"


def _imports(path: Path, mods: dict[str, Path]) -> set[str]:
    """The posbias modules ``path`` imports, at any depth of its code, except under ``if TYPE_CHECKING``."""
    import ast

    me = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
    tree = ast.parse(path.read_text())
    hinted = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test)
              for stmt in node.body for n in ast.walk(stmt)}
    out = set()
    for node in ast.walk(tree):
        if id(node) in hinted:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                pkg = me.split(".") if path.name == "__init__.py" else me.split(".")[:-1]
                pkg = pkg[:len(pkg) - node.level + 1]
                base = ".".join(pkg + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            out |= {f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names}
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
    return {m for m in out if m in mods and m != me}


def _graph() -> dict[str, set[str]]:
    mods = {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
            for p in (ROOT / "posbias").rglob("*.py")}
    return {m: _imports(p, mods) for m, p in mods.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
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
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def test_the_storage_floor_only_looks_down():
    """The store imports nothing of posbias but provenance (its reads reach a run's record through
    store.on_read); cite reads the kill table without importing the mutation engine."""
    g = _graph()
    assert g["posbias.store"] == {"posbias.provenance"}
    assert "posbias.mutation" not in g["posbias.cite"] and "posbias.parking" not in g["posbias.store"]


def test_no_import_cycles():
    """No import cycle outside type hints (the claims package no longer re-exports its tables)."""
    assert _cycles(_graph()) == []
