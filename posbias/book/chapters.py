"""Chapters: their declared parameters, profiles and validation, and their figures' captions.

A chapter is ``notebooks/<id>.md``; its YAML header carries a ``posbias`` block (see CONTRIBUTING.md)
that declares every parameter once (type, default, range or choices, meaning), the cross-parameter
constraints and the profiles as overrides of the defaults. Everything here runs before a notebook
is executed, so bad input is refused before any work starts.

A figure's caption is written once, as the body of its ``{glue:figure}`` directive in the chapter
(:func:`figure_captions`); ``posbias run`` hands them to the kernel, where ``figures.save`` embeds
them in the figure's files and record.
"""
from __future__ import annotations

import ast
import difflib
import json
import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from posbias.storage.provenance import ROOT

__all__ = ["NOTEBOOKS", "PROFILES", "BASE_PROFILES", "ParamError", "Param", "Chapter", "chapter_ids", "get_chapter",
           "figure_captions", "RULE_FUNCS", "compile_rule"]

NOTEBOOKS = ROOT / "notebooks"
#: Every chapter has these (a profile it does not declare is its defaults).
BASE_PROFILES = ("default", "smoke", "paper")
#: ``converged`` (train until a stopping rule holds), ``budget`` (the fixed-budget study) and ``confirm``
#: (the confirmation campaign: fresh seeds and test draw, judged by the frozen register) exist only
#: where a chapter declares them.
PROFILES = (*BASE_PROFILES, "converged", "budget", "confirm")
TYPES = ("int", "float", "bool", "str", "int_list", "float_list", "str_list")


class ParamError(ValueError):
    """Bad input from a reader: an unknown chapter or parameter, a wrong type, an impossible value."""


@dataclass(frozen=True)
class Param:
    name: str
    type: str
    default: Any
    help: str
    min: float | None = None
    max: float | None = None
    choices: tuple | None = None
    #: lists only: no item may appear twice (a grid of sizes, a set of seeds)
    unique: bool = False
    #: lists only: at most this many items (None: as many as the cost model allows)
    max_len: int | None = None

    def describe_range(self) -> str:
        if self.choices is not None:
            return "one of " + ", ".join(map(str, self.choices))
        lo = "-inf" if self.min is None else _fmt(self.min)
        hi = "inf" if self.max is None else _fmt(self.max)
        if self.min is None and self.max is None:
            return "any " + self.type
        if not self.type.endswith("_list"):
            return f"a value in [{lo}, {hi}]"
        extra = (", no item twice" if self.unique else "") + (f", at most {self.max_len} items" if self.max_len else "")
        return f"each element in [{lo}, {hi}]{extra}"

    def coerce(self, raw: Any) -> Any:
        """Parse ``raw`` (a string from the command line, or a YAML/JSON value) into this type."""
        base = self.type.removesuffix("_list")
        if self.type.endswith("_list"):
            if isinstance(raw, str):
                text = raw.strip()
                if text.startswith("["):
                    try:
                        items = json.loads(text)
                    except json.JSONDecodeError as e:
                        raise ParamError(self._bad(raw, f"not a JSON list ({e.msg})")) from None
                else:
                    items = text.split(",")
                    if len(items) > 1 and any(not s.strip() for s in items):
                        raise ParamError(self._bad(raw, "an empty item between commas (write e.g. 16,32,64)"))
                    items = [s for s in items if s.strip()]
            elif isinstance(raw, (list, tuple)):
                items = list(raw)
            else:
                raise ParamError(self._bad(raw, "expected a comma-separated list"))
            if not items:
                raise ParamError(self._bad(raw, "the list is empty"))
            value = [self._coerce_scalar(base, x, raw) for x in items]
            if self.unique and len(set(value)) != len(value):
                twice = sorted({v for v in value if value.count(v) > 1}, key=str)
                raise ParamError(self._bad(raw, f"{_short(twice)} given more than once; give each item once"))
            if self.max_len is not None and len(value) > self.max_len:
                raise ParamError(self._bad(raw, f"{len(value)} items, more than {self.max_len}"))
        else:
            value = self._coerce_scalar(base, raw, raw)
        self._check_range(value)
        return value

    def _coerce_scalar(self, base: str, x: Any, raw: Any) -> Any:
        if base == "int":
            if isinstance(x, bool):
                raise ParamError(self._bad(raw, "expected an integer"))
            if isinstance(x, int):
                return x
            if isinstance(x, float) and x.is_integer():
                return int(x)
            try:
                return int(str(x).strip())
            except ValueError:
                raise ParamError(self._bad(raw, "expected an integer")) from None
        if base == "float":
            if isinstance(x, bool):
                raise ParamError(self._bad(raw, "expected a number"))
            try:
                v = float(str(x).strip()) if not isinstance(x, (int, float)) else float(x)
            except ValueError:
                raise ParamError(self._bad(raw, "expected a number")) from None
            if not math.isfinite(v):
                raise ParamError(self._bad(raw, "expected a finite number"))
            return v
        if base == "bool":
            if isinstance(x, bool):
                return x
            s = str(x).strip().lower()
            if s in ("true", "1", "yes", "on"):
                return True
            if s in ("false", "0", "no", "off"):
                return False
            raise ParamError(self._bad(raw, "expected true or false"))
        return str(x)

    def _check_range(self, value: Any) -> None:
        items = value if isinstance(value, list) else [value]
        for v in items:
            if self.choices is not None and v not in self.choices:
                raise ParamError(self._bad(value, "not an allowed choice"))
            if self.min is not None and v < self.min:
                raise ParamError(self._bad(value, "below the minimum"))
            if self.max is not None and v > self.max:
                raise ParamError(self._bad(value, "above the maximum"))

    def _bad(self, raw: Any, why: str) -> str:
        return (f"parameter {self.name!r} = {_short(raw)}: {why}; {self.name} takes {self.type}, "
                f"{self.describe_range()} (default {self.default!r}; {self.help})")


def _short(value: Any, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters (a 5000-digit number is not echoed whole)."""
    if isinstance(value, int) and value.bit_length() > 200:
        return f"an integer of {value.bit_length()} bits"
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit - 25]}...({len(text)} characters)"


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


# -- constraint rules: a small, safe expression language over the parameters ------------------
_ALLOWED_NODES = (ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.USub, ast.UAdd,
                  ast.BinOp, ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow,
                  ast.Compare, ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.In, ast.NotIn,
                  ast.Name, ast.Load, ast.Constant, ast.Call, ast.List, ast.Tuple, ast.IfExp,
                  ast.GeneratorExp, ast.comprehension, ast.Store)
RULE_FUNCS = {"len": len, "min": min, "max": max, "all": all, "any": any, "abs": abs, "sorted": sorted, "set": set,
          "sum": sum, "exp": math.exp, "log": math.log, "sqrt": math.sqrt, "range": range}
COST_KEYS = ("seconds", "memory_mb", "network_step", "calibration")   # the front matter's `cost:` (posbias.book.cost)


def compile_rule(rule: str):
    tree = ast.parse(rule, mode="eval")
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED_NODES):
            raise ValueError(f"constraint {rule!r} uses a construct that is not allowed: {type(node).__name__}")
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in RULE_FUNCS):
            raise ValueError(f"constraint {rule!r} calls something other than {sorted(RULE_FUNCS)}")
    return compile(tree, f"<constraint {rule}>", "eval")


@dataclass
class Chapter:
    id: str
    path: Path
    title: str
    params: dict[str, Param]
    profiles: dict[str, dict[str, Any]]
    constraints: list[dict[str, str]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    captions: dict[str, str] = field(default_factory=dict)    # figure name -> its {glue:figure} caption

    def profile_names(self) -> list[str]:
        """The profiles this chapter can run: the three every chapter has and those it declares."""
        return [p for p in PROFILES if p in BASE_PROFILES or p in self.profiles]

    def resolve(self, profile: str = "default", overrides: dict[str, Any] | None = None, *,
                constraints: bool = True) -> dict[str, Any]:
        """Defaults, then the profile's overrides, then the reader's; all validated. Raises ParamError.
        ``constraints=False`` skips the page's cross-parameter rules (a campaign reading a subset of the
        chapter's networks, such as one depth of Figure 2, is not a page)."""
        if profile not in PROFILES:
            raise ParamError(f"unknown profile {profile!r}; choose one of {', '.join(PROFILES)}")
        if profile not in BASE_PROFILES and profile not in self.profiles:
            raise ParamError(f"chapter {self.id!r} has no {profile!r} profile; its profiles are "
                             f"{', '.join(self.profile_names())}")
        values = {name: p.default for name, p in self.params.items()}
        values.update(self.profiles.get(profile, {}))
        for name, raw in (overrides or {}).items():
            if name not in self.params:
                near = difflib.get_close_matches(name, self.params, n=1)
                hint = f" (did you mean {near[0]!r}?)" if near else ""
                raise ParamError(f"chapter {self.id!r} has no parameter {name!r}{hint}; its parameters are: "
                                 f"{', '.join(self.params) or '(none)'}. See `posbias list {self.id}`.")
            values[name] = raw
        out = {name: self.params[name].coerce(v) for name, v in values.items()}
        if constraints:
            self.check_constraints(out)
        return out

    def check_constraints(self, values: dict[str, Any]) -> None:
        for c in self.constraints:
            code = compile_rule(c["rule"])
            # the values as globals, so that a generator expression (all(w <= n for w in ws)) sees them
            try:
                ok = eval(code, {"__builtins__": {}, **RULE_FUNCS, **values})  # noqa: S307 - vetted AST above
            except (ArithmeticError, ValueError) as e:      # e.g. exp() of a huge value: out of what it covers
                ok, c = False, {**c, "message": f"{c.get('message', '')} (the rule cannot be evaluated: {e})"}
            if not ok:
                names = [n.id for n in ast.walk(ast.parse(c["rule"], mode="eval"))
                         if isinstance(n, ast.Name) and n.id in values]
                shown = ", ".join(f"{n} = {_short(values[n])}" for n in dict.fromkeys(names))
                raise ParamError(f"impossible combination for chapter {self.id!r}: {shown} violates "
                                 f"`{c['rule']}`: {c.get('message', '')}")


# -- figure captions: the bodies of the chapter's {glue:figure} directives ----------------------
_FENCE = re.compile(r"^ {0,3}(?P<fence>`{3,}|:{3,})\s*(?P<info>.*?)\s*$")
_OPTION = re.compile(r"^\s*:[\w-]+:")
# directives whose body is not markdown: a {glue:figure} inside one is not a directive
_OPAQUE = re.compile(r"^\{(code-cell|code|code-block|sourcecode|literalinclude|raw|math|eval-rst|bibliography)\}")


def _fence_end(lines: list[str], start: int, fence: str) -> int:
    """The index of the line closing ``fence`` opened just before ``start`` (``len(lines)`` if none)."""
    close = re.compile(rf"^ {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}\s*$")
    return next((k for k in range(start, len(lines)) if close.match(lines[k])), len(lines))


def _caption_of(body: list[str]) -> str:
    """A directive's body without its options (``:key: value`` lines or a ``---`` YAML block at its
    start), whitespace-normalised to one line."""
    if body and body[0].strip() == "---":
        end = next((k for k in range(1, len(body)) if body[k].strip() == "---"), None)
        body = body[end + 1:] if end is not None else body
    else:
        k = 0
        while k < len(body) and _OPTION.match(body[k]):
            k += 1
        body = body[k:]
    return " ".join(" ".join(body).split())


def _collect_captions(lines: list[str], offset: int, where: str, out: dict[str, str]) -> None:
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, info = m["fence"], m["info"]
        end = _fence_end(lines, i + 1, fence)
        figure = re.match(r"^\{glue:figure\}(?:\s+(.*))?$", info)
        if figure:
            name = (figure.group(1) or "").strip()
            if not name or " " in name:
                raise ValueError(f"{where}, line {offset + i + 1}: ```{{glue:figure}} takes one figure name, "
                                 f"got {name!r}")
            if name in out:
                raise ValueError(f"{where}: two ```{{glue:figure}} {name} directives; a figure has one caption")
            out[name] = _caption_of(lines[i + 1:end])
        elif info.startswith("{") and not _OPAQUE.match(info):
            _collect_captions(lines[i + 1:end], offset + i + 1, where, out)   # a directive of markdown
        i = end + 1


def figure_captions(text: str, where: str = "chapter") -> dict[str, str]:
    """Figure name -> caption for every ```` ```{glue:figure} NAME ```` directive in a chapter's MyST
    source ``text`` (also ``:::`` fences and directives nested in others, not code blocks): the
    directive's body without its ``:option:`` lines, whitespace-normalised. ``{glue:text}`` roles and
    math are kept as written (``figures.save`` resolves the roles). A directive without a name, or a
    name given twice, is a ValueError naming ``where``."""
    lines = text.splitlines()
    start = 0
    if lines and lines[0].strip() == "---":          # the YAML header
        start = next((k for k in range(1, len(lines)) if lines[k].strip() == "---"), len(lines)) + 1
    out: dict[str, str] = {}
    _collect_captions(lines[start:], start, where, out)
    return out


def _load_header(path: Path) -> dict[str, Any]:
    text = path.read_text(encoding="utf-8")
    if not text.startswith("---"):
        raise ValueError(f"{path}: a chapter starts with a YAML header (---)")
    end = text.find("\n---", 3)
    return yaml.safe_load(text[3:end]) or {}


@lru_cache(maxsize=None)
def _load(chapter_id: str) -> Chapter:
    path = NOTEBOOKS / f"{chapter_id}.md"
    header = _load_header(path)
    block = header.get("posbias") or {}
    if "kernelspec" not in header:
        raise ValueError(f"{path}: the header needs a kernelspec")
    params: dict[str, Param] = {}
    for name, spec in (block.get("parameters") or {}).items():
        if spec.get("type") not in TYPES:
            raise ValueError(f"{path}: parameter {name} has type {spec.get('type')!r}; types are {TYPES}")
        if not spec.get("help"):
            raise ValueError(f"{path}: parameter {name} needs a one-line 'help'")
        choices = tuple(spec["choices"]) if spec.get("choices") is not None else None
        if (spec.get("unique") or spec.get("max_len")) and not spec["type"].endswith("_list"):
            raise ValueError(f"{path}: parameter {name}: unique and max_len apply to lists only")
        p = Param(name, spec["type"], spec.get("default"), spec["help"], spec.get("min"), spec.get("max"), choices,
                  bool(spec.get("unique", False)), spec.get("max_len"))
        p.coerce(p.default)  # the declared default must itself be valid
        params[name] = p
    profiles = {k: dict(v or {}) for k, v in (block.get("profiles") or {}).items()}
    for prof, over in profiles.items():
        if prof not in PROFILES:
            raise ValueError(f"{path}: unknown profile {prof!r}; profiles are {PROFILES}")
        unknown = set(over) - set(params)
        if unknown:
            raise ValueError(f"{path}: profile {prof} sets undeclared parameters {sorted(unknown)}")
    constraints = list(block.get("constraints") or [])
    for c in constraints:
        compile_rule(c["rule"])
    cost = block.get("cost") or {}
    if set(cost) - set(COST_KEYS):
        raise ValueError(f"{path}: cost declares {sorted(set(cost) - set(COST_KEYS))}; its keys are {COST_KEYS}")
    for key in ("seconds", "memory_mb", "network_step"):
        if key in cost:
            compile_rule(str(cost[key]))
    captions = figure_captions(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)
                                                                  if path.is_relative_to(ROOT) else path))
    return Chapter(chapter_id, path, block.get("title") or chapter_id, params, profiles, constraints, block,
                   captions)


def chapter_ids() -> list[str]:
    """Every chapter id (notebook stem), sorted."""
    return sorted(p.stem for p in NOTEBOOKS.glob("*.md"))


def get_chapter(chapter_id: str) -> Chapter:
    """The chapter, or ParamError naming the valid ids."""
    ids = chapter_ids()
    if chapter_id not in ids:
        near = difflib.get_close_matches(chapter_id, ids, n=3)
        hint = f" Did you mean {', '.join(near)}?" if near else ""
        raise ParamError(f"unknown chapter {chapter_id!r}.{hint} Chapters: {', '.join(ids)}. "
                         "Run `posbias list` to see them with their titles.")
    return _load(chapter_id)


