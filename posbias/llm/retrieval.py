"""Key-value retrieval, Liu et al.'s synthetic task: random prompts, the evidence at a chosen position,
scored by a greedy answer, the pair it copied and the log-probability of the right value.
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass

import torch

__all__ = ["KVExample", "kv_example", "kv_prompt", "retrieve", "copied_pair", "evidence_positions",
           "retrieval_rows"]


@dataclass(frozen=True)
class KVExample:
    """One retrieval prompt: ``pairs`` in context order, the queried pair at index ``gold``."""

    pairs: tuple[tuple[str, str], ...]
    gold: int

    @property
    def key(self) -> str:
        return self.pairs[self.gold][0]

    @property
    def value(self) -> str:
        return self.pairs[self.gold][1]


def kv_example(n_pairs: int, gold: int, seed: int, n_hex: int = 8) -> KVExample:
    """``n_pairs`` distinct random hexadecimal key/value strings, the question on pair ``gold`` (0-based)."""
    if not 0 <= gold < n_pairs:
        raise ValueError(f"gold must be in [0, {n_pairs}), got {gold}")
    rng = random.Random(seed)
    seen: set[str] = set()
    strings: list[str] = []
    while len(strings) < 2 * n_pairs:
        s = "".join(rng.choice("0123456789abcdef") for _ in range(n_hex))
        if s not in seen:
            seen.add(s)
            strings.append(s)
    pairs = tuple((strings[2 * i], strings[2 * i + 1]) for i in range(n_pairs))
    return KVExample(pairs=pairs, gold=gold)


def kv_prompt(ex: KVExample, tokenizer=None) -> str:
    """The prompt text: instruction, JSON object, question (Liu et al.'s wording), then the start of
    the answer up to the opening quote of the value, so the next tokens are the value itself.

    In the chat template when ``tokenizer`` has one (the answer prefix opens the assistant turn).
    """
    body = json.dumps(dict(ex.pairs), indent=None)
    user = ("Extract the value corresponding to the specified key in the JSON object below.\n\n"
            f"JSON data:\n{body}\n\nKey: \"{ex.key}\"\nCorresponding value:")
    answer = f'The value corresponding to the key "{ex.key}" is "'
    if tokenizer is not None and getattr(tokenizer, "chat_template", None):
        head = tokenizer.apply_chat_template([{"role": "user", "content": user}], tokenize=False,
                                             add_generation_prompt=True)
        return head + answer
    return user + "\n" + answer


def answer_tokens(n_hex: int) -> int:
    """New tokens the greedy answer gets for values of ``n_hex`` characters: ``max(10, n_hex)``. Every
    token holds at least one character, so the answer always reaches the value's length (a fixed 10
    cut answers short for values longer than 10 characters, and none could be right)."""
    return max(10, n_hex)


@torch.no_grad()
def retrieve(model, tokenizer, ex: KVExample, max_new_tokens: int | None = None) -> dict:
    """Score one example: greedy answer, whether it is right, which pair it copied, log p(value).

    The greedy answer is ``max_new_tokens`` tokens long, by default :func:`answer_tokens` of the value.

    Returns ``{"correct", "copied" (index of the pair whose value the answer starts with, -1 for
    none, -2 for a key copied instead of a value), "logp" (sum over the value's tokens, teacher
    forced), "answer"}``.
    """
    prompt = kv_prompt(ex, tokenizer)
    p_ids = tokenizer(prompt, add_special_tokens=False, return_tensors="pt")["input_ids"]
    v_ids = tokenizer(ex.value, add_special_tokens=False, return_tensors="pt")["input_ids"]
    both = torch.cat([p_ids, v_ids], dim=1)
    logits = model(input_ids=both).logits[0, p_ids.shape[1] - 1:-1].float()
    logp = float(torch.log_softmax(logits, -1).gather(-1, v_ids[0, :, None]).sum())
    if max_new_tokens is None:
        max_new_tokens = answer_tokens(len(ex.value))
    gen = model.generate(p_ids, attention_mask=torch.ones_like(p_ids), max_new_tokens=max_new_tokens,
                         do_sample=False, pad_token_id=tokenizer.eos_token_id)
    answer = tokenizer.decode(gen[0, p_ids.shape[1]:], skip_special_tokens=True)
    return {"correct": answer.startswith(ex.value), "copied": copied_pair(ex, answer),
            "logp": logp, "answer": answer}


def _common_prefix(a: str, b: str) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def copied_pair(ex: KVExample, answer: str, min_chars: int = 4) -> int:
    """Index of the pair whose value the answer starts with (longest common prefix, at least
    ``min_chars`` characters, ties to the earlier pair).

    ``-2`` when the answer instead starts like one of the keys, ``-1`` when it matches neither.
    """
    text = answer.strip().lstrip('"')
    vals = [_common_prefix(text, v) for _, v in ex.pairs]
    keys = [_common_prefix(text, k) for k, _ in ex.pairs]
    if max(vals) >= min_chars and max(vals) >= max(keys):
        return vals.index(max(vals))
    return -2 if max(keys) >= min_chars else -1


def evidence_positions(n_pairs: int, n_positions: int) -> list[int]:
    """``n_positions >= 2`` evidence positions spread evenly from the first pair to the last, 0-based:
    ``floor(1 + i (n_pairs - 1) / (n_positions - 1)) - 1`` (Liu et al.'s 1, 25, 50, 75 of 75 pairs)."""
    if not 2 <= n_positions <= n_pairs:
        raise ValueError(f"need 2 <= n_positions <= n_pairs, got {n_positions} of {n_pairs}")
    return [i * (n_pairs - 1) // (n_positions - 1) for i in range(n_positions)]


def retrieval_rows(model, tokenizer, n_pairs: int, trials: int, n_hex: int = 8, seed: int = 0,
                   positions: list[int] | None = None, max_new_tokens: int | None = None) -> list[dict]:
    """Score ``trials`` random key-value prompts for every evidence position in ``positions``
    (0-based indices of the queried pair; None: all of ``0..n_pairs-1``), greedy answers of
    ``max_new_tokens`` (:func:`retrieve`'s default when None).

    Prompt ``(g, r)`` is ``kv_example(n_pairs, g, seed * 1_000_003 + g * 1000 + r, n_hex)``.
    Returns ``len(positions) * trials`` rows in position-major order, each ``{"gold": g, "trial": r}``
    and the fields of :func:`retrieve` (``correct``, ``copied``, ``logp`` in nats, ``answer``).
    """
    rows = []
    for g in (range(n_pairs) if positions is None else positions):
        for r in range(trials):
            ex = kv_example(n_pairs, g, seed=seed * 1_000_003 + g * 1000 + r, n_hex=n_hex)
            rows.append({"gold": g, "trial": r, **retrieve(model, tokenizer, ex, max_new_tokens=max_new_tokens)})
    return rows
