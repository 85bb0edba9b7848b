"""CITATION.cff is valid Citation File Format 1.2.0 and agrees with the package and the bibliography."""
import importlib.util
import json
import re
import tomllib
from pathlib import Path

import jsonschema
import yaml

ROOT = Path(__file__).resolve().parent.parent


def _schema() -> dict:
    # The official CFF 1.2.0 schema, as shipped in the cffconvert wheel (installed without its
    # dependencies, whose jsonschema<4 pin clashes with Jupyter's); read as data, not imported.
    spec = importlib.util.find_spec("cffconvert")
    assert spec is not None, "cffconvert is not installed: run `make install` (it installs cffconvert==2.0.0 --no-deps)"
    return json.loads((Path(spec.submodule_search_locations[0]) / "schemas" / "1.2.0" / "schema.json").read_text())


def _cff() -> dict:
    return json.loads(json.dumps(yaml.safe_load((ROOT / "CITATION.cff").read_text()), default=str))


def test_citation_cff_is_valid():
    validator = jsonschema.Draft7Validator(_schema(), format_checker=jsonschema.FormatChecker())
    errors = [f"{'/'.join(map(str, e.path))}: {e.message}" for e in validator.iter_errors(_cff())]
    assert not errors, errors


def test_the_validator_rejects_a_broken_file():
    broken = _cff()
    broken["authors"] = [{"nme": "typo"}]
    del broken["title"]
    assert len(list(jsonschema.Draft7Validator(_schema()).iter_errors(broken))) >= 2


def test_citation_agrees_with_the_package_and_cites_the_three_sources():
    cff = _cff()
    assert cff["version"] == tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert cff["cff-version"] == "1.2.0"
    titles = {r["title"] for r in cff["references"]}
    bib = (ROOT / "references.bib").read_text()
    for title in ["On the Emergence of Position Bias in Transformers",
                  "LayerNorm Induces Recency Bias in Transformer Decoders",
                  "Attention Sinks and Retrieval Decay"]:
        assert title in titles, title
        assert re.search(r"title\s*=\s*\{" + re.escape(title) + r"\}", bib), title
