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
