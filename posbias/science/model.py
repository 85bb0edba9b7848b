"""The attention-only network of Wu et al. (2025), with a leading ensemble axis.

One member is: optional sinusoidal PE added to the input tokens ``(T, D)``; ``depth`` single-head
attention layers ``X <- A V`` (or ``X <- X + A V`` with the residual), where
``A = softmax_mask(Q K^T / sqrt(D) + bias)``, ``Q, K, V = X W_Q, X W_K, X W_V`` (no biases, no
output projection, no LayerNorm, no MLP between layers), queries and keys optionally rotated by
RoPE; then a classifier on the query token: 3 x (Linear D->D + ReLU) and Linear D->L.

``E`` members of the same depth live in one module: every parameter has a leading axis ``E`` and
every operation acts on each member separately (batched matmuls, elementwise ops), so training
the ensemble gives, bit for bit, the same weights as training each member alone. Members may
differ in mask, PE, residual and seed.

Engines. The same network can be computed in more than one way (:data:`ENGINES`); an engine is a
declared version, because a different order of float32 operations gives other roundings (the
same function, other last bits). ``"v2"`` is the engine every committed unit was trained with
(``wu-units`` VERSION 2) and stays the default (:data:`DEFAULT_ENGINE`) until a campaign's key
names the engine. ``"v3"`` computes Q, K and V of a layer in one product with the three weights
side by side, and the last layer's one query row against the keys and values as elementwise
products and sums instead of batched matrix-vector products (whose backward is a batch of outer
products): its losses match v2's to float32 rounding (``tests/test_model_engines.py``; 200 steps
in ``benchmarks/train_throughput.py --equivalence 200``). A unit is bit-identical alone and in any
ensemble under either engine. On the AMD AVX-512 host of issue 66, v3 was not faster than v2
(``benchmarks/README.md``), so nothing trains with it by default.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
from torch import nn

from posbias.science.attention import decay_bias, rope_angles, sinusoidal_pe
from posbias.science.masks import make_mask

__all__ = ["MemberConfig", "EnsembleNet", "rotate_pairs", "MASK_KINDS", "PE_KINDS", "ENGINES", "DEFAULT_ENGINE"]

MASK_KINDS = ("full", "causal", "decay", "prefix", "window")
PE_KINDS = ("none", "sin", "rope")
#: The ways of computing the network (see the module docstring); each is a declared version.
ENGINES = ("v2", "v3")
#: The engine :class:`EnsembleNet` uses unless told otherwise: the one the committed units were trained with.
DEFAULT_ENGINE = "v2"


@dataclass(frozen=True)
class MemberConfig:
    """Architecture of one member. ``decay`` is the causal mask with logit bias ``-m (i-j)``,
    ``m = -ln gamma`` (a mask, not a PE); ``window``/``prefix`` need their width/size in tokens."""

    mask: str = "causal"
    pe: str = "none"
    residual: bool = False
    window: int | None = None
    prefix: int | None = None
    gamma: float = 0.8
    rope_base: float = 10000.0

    def __post_init__(self) -> None:
        if self.mask not in MASK_KINDS:
            raise ValueError(f"unknown mask {self.mask!r}; choose one of {MASK_KINDS}")
        if self.pe not in PE_KINDS:
            raise ValueError(f"unknown PE {self.pe!r}; choose one of {PE_KINDS}")
        if not 0 < self.gamma <= 1:
            raise ValueError(f"decay gamma must be in (0, 1], got {self.gamma}")

    def mask_and_bias(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Boolean mask ``(n, n)`` and additive logit bias ``(n, n)`` (float32)."""
        if self.mask == "decay":
            return make_mask("causal", n), decay_bias(n, -math.log(self.gamma), dtype=torch.float32)
        return make_mask(self.mask, n, window=self.window, prefix=self.prefix), torch.zeros(n, n)

    def to_dict(self) -> dict:
        return asdict(self)


def rotate_pairs(x: torch.Tensor, rot: torch.Tensor) -> torch.Tensor:
    """RoPE: ``x`` ``(..., n, D)`` with interleaved pairs rotated by ``rot`` ``(n, D/2)`` (complex, unit modulus).

    Equals :func:`~posbias.science.attention.apply_rope` with ``rot = e^{i angles}`` up to float rounding.
    """
    z = torch.view_as_complex(x.unflatten(-1, (-1, 2)).contiguous())
    return torch.view_as_real(z * rot).flatten(-2)


def _uniform(g: torch.Generator, shape: tuple[int, ...], fan_in: int) -> torch.Tensor:
    """PyTorch's default ``nn.Linear`` init: ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))``."""
    bound = 1 / math.sqrt(fan_in)
    return (torch.rand(shape, generator=g) * 2 - 1) * bound


class EnsembleNet(nn.Module):
    """``E`` attention-only classifiers of equal depth, trained as one batched model.

    Parameters: ``w_q, w_k, w_v`` ``(E, depth, D, D)`` acting as ``X @ W``; classifier weights
    ``(E, D_in, D_out)`` and biases ``(E, D_out)``. Member ``e`` is initialised from ``seeds[e]``
    alone, so its initial weights do not depend on the other members. ``engine`` (one of
    :data:`ENGINES`, default :data:`DEFAULT_ENGINE`) chooses how the forward pass is computed; the
    parameters, their initialisation and the state dict are the same under every engine.
    """

    def __init__(self, configs: list[MemberConfig], seeds: list[int], depth: int, *,
                 dim: int = 64, n_labels: int = 32, n_tokens: int = 17, query_only: bool = True,
                 engine: str | None = None) -> None:
        super().__init__()
        self.engine = DEFAULT_ENGINE if engine is None else engine
        if self.engine not in ENGINES:
            raise ValueError(f"unknown engine {self.engine!r}; choose one of {ENGINES}")
        if len(configs) != len(seeds) or not configs:
            raise ValueError("need one seed per member and at least one member")
        if depth < 1:
            raise ValueError("depth must be >= 1")
        self.configs, self.seeds, self.depth = list(configs), list(seeds), depth
        self.dim, self.n_labels, self.n_tokens, self.query_only = dim, n_labels, n_tokens, query_only
        E, D = len(configs), dim
        dims = [D, D, D, D, n_labels]
        att = {k: [] for k in ("q", "k", "v")}
        cw, cb = [[] for _ in range(4)], [[] for _ in range(4)]
        for seed in seeds:
            g = torch.Generator().manual_seed(int(seed))
            for name in ("q", "k", "v"):
                att[name].append(_uniform(g, (depth, D, D), D))
            for i in range(4):
                cw[i].append(_uniform(g, (dims[i], dims[i + 1]), dims[i]))
                cb[i].append(_uniform(g, (dims[i + 1],), dims[i]))
        self.w_q = nn.Parameter(torch.stack(att["q"]))
        self.w_k = nn.Parameter(torch.stack(att["k"]))
        self.w_v = nn.Parameter(torch.stack(att["v"]))
        self.cls_w = nn.ParameterList([nn.Parameter(torch.stack(w)) for w in cw])
        self.cls_b = nn.ParameterList([nn.Parameter(torch.stack(b)) for b in cb])

        masks, biases = zip(*(c.mask_and_bias(n_tokens) for c in configs))
        self.register_buffer("mask", torch.stack(masks).unsqueeze(1), persistent=False)      # (E,1,T,T)
        self.register_buffer("bias", torch.stack(biases).unsqueeze(1), persistent=False)     # (E,1,T,T)
        flag = lambda xs: torch.tensor(xs, dtype=torch.float32)  # noqa: E731
        self.register_buffer("use_sin", flag([c.pe == "sin" for c in configs]).view(E, 1, 1, 1), persistent=False)
        self.register_buffer("rope_members", torch.tensor([e for e, c in enumerate(configs) if c.pe == "rope"],
                                                          dtype=torch.long), persistent=False)
        self.register_buffer("residual", flag([c.residual for c in configs]).view(E, 1, 1, 1), persistent=False)
        self.register_buffer("pe", sinusoidal_pe(n_tokens, D), persistent=False)                 # (T, D)
        bases = {c.rope_base for c in configs}
        if len(bases) > 1:
            raise ValueError("all members of one ensemble must share the RoPE base")
        self.register_buffer("angles", rope_angles(n_tokens, D, bases.pop()), persistent=False)  # (T, D/2)
        # unit complex numbers e^{i angle}: RoPE as one complex product per interleaved pair
        rot = torch.polar(torch.ones_like(self.angles), self.angles).to(torch.complex64)
        self.register_buffer("rot", rot, persistent=False)                                      # (T, D/2)
        # mask and bias as one additive logit term: the bias where allowed, -inf where forbidden
        self.register_buffer("logit_bias", self.bias.masked_fill(~self.mask, float("-inf")), persistent=False)
        self._any_sin = any(c.pe == "sin" for c in configs)
        self._any_residual = any(c.residual for c in configs)

    @property
    def n_members(self) -> int:
        return len(self.configs)

    @staticmethod
    def _proj(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        """``x`` ``(E, b, n, D)`` times ``w`` ``(E, D, D)`` as one bmm per member."""
        E, b, n, D = x.shape
        return torch.bmm(x.reshape(E, b * n, D), w).view(E, b, n, w.shape[-1])

    def _rope(self, x: torch.Tensor, rows: slice) -> torch.Tensor:
        """Rotate ``x`` ``(E, b, n, D)`` by RoPE for the members that use it, and only for them.

        Pairs ``(x[2p], x[2p+1])`` are read as complex numbers and multiplied by ``e^{i angle}``, the
        rotation of :func:`~posbias.science.attention.apply_rope` in one elementwise product. Ensembles whose
        members all use RoPE (or none) avoid the gather/scatter of a mixed ensemble.
        """
        idx = self.rope_members
        if idx.numel() == 0:
            return x
        if idx.numel() == x.shape[0]:
            return rotate_pairs(x, self.rot[rows])
        return x.index_copy(0, idx, rotate_pairs(x.index_select(0, idx), self.rot[rows]))

    def forward(self, tokens: torch.Tensor, return_attention: bool = False):
        """``tokens`` ``(E, b, T, D)`` -> label logits ``(E, b, L)``.

        With ``return_attention`` also returns the attention maps ``(E, depth, b, T, T)`` (all rows
        of every layer, so the last layer is computed in full). Otherwise the last layer computes
        only the query row (``query_only``), which is all the classifier reads.
        """
        if self.engine == "v3":
            return self._forward_v3(tokens, return_attention)
        T = self.n_tokens
        x = tokens + self.use_sin * self.pe if self._any_sin else tokens
        maps = []
        for t in range(self.depth):
            last = t == self.depth - 1
            rows = slice(T - 1, T) if (last and self.query_only and not return_attention) else slice(0, T)
            xq = x[:, :, rows]
            q = self._rope(self._proj(xq, self.w_q[:, t]), rows)
            k = self._rope(self._proj(x, self.w_k[:, t]), slice(0, T))
            v = self._proj(x, self.w_v[:, t])
            logits = (q @ k.transpose(-1, -2)) * (1 / math.sqrt(self.dim)) + self.logit_bias[:, :, rows]
            a = torch.softmax(logits, dim=-1)         # forbidden entries are exactly 0
            if return_attention:
                maps.append(a)
            x = a @ v + self.residual * xq if self._any_residual else a @ v
        return self._classify(x[:, :, -1], maps, return_attention)

    def _classify(self, h: torch.Tensor, maps: list[torch.Tensor], return_attention: bool):
        """The classifier on the query token's features ``h`` ``(E, b, D)``; the maps stacked when asked."""
        for i in range(4):
            h = torch.baddbmm(self.cls_b[i].unsqueeze(1), h, self.cls_w[i])
            if i < 3:
                h = torch.relu(h)
        if return_attention:
            return h, torch.stack(maps, dim=1)
        return h

    def _forward_v3(self, tokens: torch.Tensor, return_attention: bool):
        """Engine v3 (see the module docstring): one fused Q/K/V product per layer (K/V in the last
        layer, whose query row is projected alone), the last layer's query row attended elementwise."""
        T, D = self.n_tokens, self.dim
        x = tokens + self.use_sin * self.pe if self._any_sin else tokens
        E, b = x.shape[:2]
        scale, maps = 1 / math.sqrt(self.dim), []
        for t in range(self.depth):
            last = t == self.depth - 1
            if last and self.query_only and not return_attention:
                xq = x[:, :, T - 1]                                                     # (E, b, D)
                kv = torch.bmm(x.reshape(E, b * T, D),
                               torch.cat((self.w_k[:, t], self.w_v[:, t]), dim=-1)).view(E, b, T, 2, D)
                q = torch.bmm(xq, self.w_q[:, t])                                       # (E, b, D)
                k, v = self._rope(kv[..., 0, :], slice(0, T)), kv[..., 1, :]
                q = self._rope(q.unsqueeze(2), slice(T - 1, T)).squeeze(2)
                logits = (k * q.unsqueeze(2)).sum(-1) * scale + self.logit_bias[:, :, T - 1]   # (E, b, T)
                a = torch.softmax(logits, dim=-1)
                out = (a.unsqueeze(-1) * v).sum(2)                                       # (E, b, D)
                h = out + self.residual[..., 0] * xq if self._any_residual else out
                return self._classify(h, maps, return_attention)
            w = torch.cat((self.w_q[:, t], self.w_k[:, t], self.w_v[:, t]), dim=-1)     # (E, D, 3D)
            qkv = torch.bmm(x.reshape(E, b * T, D), w).view(E, b, T, 3, D)
            q, k, v = (self._rope(qkv[..., 0, :], slice(0, T)), self._rope(qkv[..., 1, :], slice(0, T)),
                       qkv[..., 2, :])
            logits = (q @ k.transpose(-1, -2)) * scale + self.logit_bias
            a = torch.softmax(logits, dim=-1)
            if return_attention:
                maps.append(a)
            x = a @ v + self.residual * x if self._any_residual else a @ v
        return self._classify(x[:, :, -1], maps, return_attention)

    def member_state(self, e: int) -> dict[str, torch.Tensor]:
        """Parameters of member ``e`` (without the ensemble axis)."""
        return {k: v[e].detach().clone() for k, v in self.named_parameters()}
