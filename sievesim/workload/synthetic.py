"""Synthetic routing for models without traces.

Model (per MoE layer ``l``):

1. **Popularity** ``p_l`` over the E experts: a *flat-topped head* of ``hot_frac * E`` experts that
   carries ``1 - cold_mass`` of the token mass (log-normal spread ``head_sigma`` within the head)
   and a *heavy cold tail* of the other experts carrying ``cold_mass`` (log-normal spread
   ``tail_sigma``, so the tail runs from lukewarm experts down to experts that are almost never
   chosen). Not one Zipf law: ``../shared/reference/facts.md`` section 5 shows that no single
   rank-Zipf matches measured concentration. The spreads are deterministic normal quantiles, so
   the shape is a smooth function of the parameters (this is what the fit in
   :mod:`sievesim.workload.fit` relies on). Layers differ in skew: layer ``l`` uses
   ``p_l ∝ shape ** exp(layer_spread * z_l)`` with ``z_l`` standard-normal quantiles over the
   layers, in a random order.
2. A **random permutation** of the experts per layer (which experts are hot differs per layer).
3. **Top-k without replacement** per token: the k experts are drawn one after the other, each
   proportional to ``p_l`` among the experts not yet chosen (Plackett-Luce; implemented as
   alias-table draws with rejection of repeats, exact).
4. **Persistence** between a request's consecutive tokens: each of the k slots keeps the expert
   the same request had in that slot at its previous token with probability ``persistence``;
   the other slots are drawn as in 3 among the experts not kept.
5. **Group-limited routing** where the model has it (DeepSeek-V3: 8 groups of 32 experts, each
   token's experts from 4 of them): groups first, then the experts among the chosen groups'
   (:mod:`sievesim.workload.grouped`); a model without groups draws exactly as in 3 and 4.

Every random choice comes from a ``numpy.random.Generator`` seeded explicitly: the popularity
(from ``seed``) and the token draws (from the stream's ``seed``) are reproducible bit for bit.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
from scipy.special import ndtri

from ..errors import ConfigError, field_error
from .._validate import check_memory

# Peak bytes per (token, layer, slot) of one synthetic step (`sievesim trace-stats synthetic:MODEL
# --batch-sizes 16384 --batches 2`, peak RSS over --batch-sizes 1: 39 B on qwen3.5-397b-a17b,
# 44 B on mixtral-8x7b), with a margin.
_BYTES_PER_ROUTED_SLOT = 48
from .routing import RoutingSource, RoutingStep, RoutingStream, counts_from_ids

try:  # compiled with the package (setup.py); SyntheticSource._sample_numpy computes the same ids
    from . import _grouped_draw as _kernels
except ImportError:  # pragma: no cover - only when running from an unbuilt source tree
    _kernels = None

__all__ = ["SyntheticParams", "SyntheticSource", "PRESETS", "popularity_shape",
           "layer_popularity", "preset_params", "source_for_model"]


@dataclass(frozen=True)
class SyntheticParams:
    """Parameters of the synthetic routing model (see the module docstring).

    Attributes:
        num_experts: routed experts per MoE layer (E).
        top_k: experts per token (K).
        num_layers: MoE layers (L).
        hot_frac: fraction of the experts in the popular head, (0, 1).
        cold_mass: share of all (token, slot) assignments that go to the tail, (0, 1).
        head_sigma: log-normal spread of popularity inside the head (0 = perfectly flat).
        tail_sigma: log-normal spread inside the tail (large = heavy, long cold tail).
        layer_spread: spread of the per-layer skew exponent (0 = every layer has the same shape).
        persistence: probability that a slot keeps the previous token's expert, [0, 1).
        expert_groups: groups of consecutive experts for group-limited routing (the model's
            ``expert_groups``), None: none (:mod:`sievesim.workload.grouped`).
        top_k_groups: groups a token's experts come from, None: every group.
        fitted_to: what the parameters were calibrated against (documentation only).
    """

    num_experts: int
    top_k: int
    num_layers: int
    hot_frac: float = 0.5
    cold_mass: float = 0.1
    head_sigma: float = 0.5
    tail_sigma: float = 1.5
    layer_spread: float = 0.0
    persistence: float = 0.0
    fitted_to: str = ""
    expert_groups: int | None = None
    top_k_groups: int | None = None

    def __post_init__(self) -> None:
        def need(ok: bool, fld: str, expected: str) -> None:
            if not ok:
                raise field_error(f"synthetic.{fld}", getattr(self, fld), expected)
        need(self.num_experts >= 1, "num_experts", "an integer >= 1")
        need(1 <= self.top_k <= self.num_experts, "top_k", f"an integer in [1, num_experts = {self.num_experts}]")
        need(self.num_layers >= 1, "num_layers", "an integer >= 1")
        need(0.0 < self.hot_frac < 1.0, "hot_frac", "a fraction in (0, 1)")
        need(0.0 < self.cold_mass < 1.0, "cold_mass", "a fraction in (0, 1)")
        need(0.0 <= self.head_sigma <= 10.0, "head_sigma", "a spread in [0, 10]")
        need(0.0 <= self.tail_sigma <= 10.0, "tail_sigma", "a spread in [0, 10]")
        need(0.0 <= self.layer_spread <= 3.0, "layer_spread", "a spread in [0, 3]")
        need(0.0 <= self.persistence < 1.0, "persistence", "a probability in [0, 1)")
        groups, chosen = self.expert_groups, self.top_k_groups
        need(groups is None or (isinstance(groups, (int, np.integer)) and groups >= 1
                                and self.num_experts % groups == 0),
             "expert_groups", f"none or a divisor of num_experts = {self.num_experts}")
        need(chosen is None or (groups is not None and isinstance(chosen, (int, np.integer)) and 1 <= chosen <= groups
                                and self.top_k <= chosen * (self.num_experts // groups)),
             "top_k_groups", f"none, or with expert_groups a count in [1, expert_groups] whose groups hold top_k "
                             f"= {self.top_k} experts")

    def shape_vector(self) -> np.ndarray:
        """The five fitted shape parameters as an array (hot_frac, cold_mass, head_sigma,
        tail_sigma, layer_spread)."""
        return np.array([self.hot_frac, self.cold_mass, self.head_sigma, self.tail_sigma,
                         self.layer_spread])

    def with_shape(self, x: np.ndarray) -> "SyntheticParams":
        """A copy with the shape parameters set from :meth:`shape_vector`-ordered ``x``."""
        return replace(self, hot_frac=float(x[0]), cold_mass=float(x[1]), head_sigma=float(x[2]),
                       tail_sigma=float(x[3]), layer_spread=float(x[4]))


_FLOOR = 1e-12  # every expert keeps a tiny probability, so top-k always has k candidates


def popularity_shape(num_experts: int, hot_frac: float, cold_mass: float, head_sigma: float,
                     tail_sigma: float) -> np.ndarray:
    """(E,) expert popularity (sums to 1) in rank order (unpermuted), see the module docstring."""
    e = num_experts
    r = np.arange(e, dtype=np.float64)
    h = min(max(hot_frac * e, 1e-3), e - 1e-3)
    f = np.clip(h - r, 0.0, 1.0)  # membership in the head (fractional for the boundary expert)
    eps = 0.5 / e
    qh = np.clip((r + 0.5) / h, eps, 1 - eps)
    qt = np.clip((r - h + 0.5) / (e - h), eps, 1 - eps)
    head = f * np.exp(head_sigma * ndtri(1 - qh))
    tail = (1 - f) * np.exp(tail_sigma * ndtri(1 - qt))
    p = (1 - cold_mass) * head / head.sum() + cold_mass * tail / tail.sum()
    p = np.maximum(p, _FLOOR)
    return p / p.sum()


def _layer_exponents(num_layers: int, layer_spread: float) -> np.ndarray:
    """(L,) skew exponents exp(layer_spread * z_l), z_l = normal quantiles (sorted)."""
    z = ndtri((np.arange(num_layers) + 0.5) / num_layers)
    return np.exp(layer_spread * z)


def layer_shapes(params: SyntheticParams) -> np.ndarray:
    """(L, E) per-layer popularity in rank order (before the random permutation and layer shuffle)."""
    base = popularity_shape(params.num_experts, params.hot_frac, params.cold_mass,
                            params.head_sigma, params.tail_sigma)
    ex = _layer_exponents(params.num_layers, params.layer_spread)
    w = np.exp(np.log(base)[None, :] * ex[:, None])
    w = np.maximum(w / w.sum(axis=1, keepdims=True), _FLOOR)
    return w / w.sum(axis=1, keepdims=True)


def layer_popularity(params: SyntheticParams, seed: int = 0) -> np.ndarray:
    """(L, E) expert popularity per layer: shapes shuffled over layers, experts permuted per layer."""
    rng = np.random.default_rng([seed, 0x5E7E])
    shapes = layer_shapes(params)[rng.permutation(params.num_layers)]
    out = np.empty_like(shapes)
    for layer in range(params.num_layers):
        out[layer, rng.permutation(params.num_experts)] = shapes[layer]
    return out


def _alias_tables(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Vose alias tables for each row of (L, E) ``p``: (prob, alias), both (L, E)."""
    num_layers, e = p.shape
    prob = np.ones((num_layers, e))
    alias = np.tile(np.arange(e), (num_layers, 1))
    for layer in range(num_layers):
        q = p[layer] * e
        small = [i for i in range(e) if q[i] < 1.0]
        large = [i for i in range(e) if q[i] >= 1.0]
        while small and large:
            s, g = small.pop(), large.pop()
            prob[layer, s] = q[s]
            alias[layer, s] = g
            q[g] = (q[g] + q[s]) - 1.0
            (small if q[g] < 1.0 else large).append(g)
        for i in small + large:
            prob[layer, i] = 1.0
    return prob, alias


class SyntheticSource(RoutingSource):
    """A :class:`RoutingSource` drawing routing from :class:`SyntheticParams`.

    Args:
        params: the model parameters.
        seed: seed of the per-layer popularity (which experts are hot).
        name: label (the preset name).
    """

    def __init__(self, params: SyntheticParams, *, seed: int = 0, name: str = "synthetic") -> None:
        self.params = params
        self.name = name
        self.num_experts = params.num_experts
        self.top_k = params.top_k
        self.num_layers = params.num_layers
        self.popularity = layer_popularity(params, seed)
        prob, alias = _alias_tables(self.popularity)
        e = params.num_experts
        self._grouped = None
        if params.expert_groups is not None and (params.top_k_groups or params.expert_groups) < params.expert_groups:
            from .grouped import GroupedSampler
            self._grouped = GroupedSampler(self.popularity, params.expert_groups, params.top_k_groups, params.top_k,
                                           _alias_tables)
        self._prob = prob.ravel()
        self._alias = (alias + (np.arange(params.num_layers) * e)[:, None]).ravel()

    @classmethod
    def from_preset(cls, name: str, *, seed: int = 0, **overrides: Any) -> "SyntheticSource":
        """The source of a preset of :data:`PRESETS` (``overrides`` replace parameters). ``like-PRESET``
        is the preset's fitted shape under another model's E, top-k and MoE layers (``overrides``),
        the routing :func:`source_for_model` gives a model without a preset of its own."""
        params = preset_params(name[len("like-"):] if name.startswith("like-") else name)
        if overrides:
            bad = sorted(set(overrides) - set(asdict(params)))
            if bad:
                raise ConfigError(f"synthetic:{name}: unknown parameters {bad}")
            params = replace(params, **overrides)
        return cls(params, seed=seed, name=name)

    def stream(self, batch_size: int, *, seed: int = 0, mode: str = "distinct",
               new_request_prob: float = 0.0, **options: object) -> "SyntheticStream":
        """A stream of B requests. ``new_request_prob``: per step, probability that a slot's request
        ends and a new one (no persistence at its first token) takes its place."""
        if options:
            raise ConfigError(f"unknown stream options {sorted(options)}")
        if mode != "distinct":
            raise field_error("mode", mode, "'distinct' (synthetic routing has independent requests)")
        if not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise field_error("batch_size", batch_size, "an integer >= 1")
        if not 0.0 <= new_request_prob <= 1.0:
            raise field_error("new_request_prob", new_request_prob, "a probability in [0, 1]")
        p = self.params
        check_memory(batch_size * p.num_layers * p.top_k * _BYTES_PER_ROUTED_SLOT,
                     f"synthetic routing of {batch_size} tokens x {p.num_layers} layers x top-{p.top_k}",
                     "batch size", batch_size)
        return SyntheticStream(self, int(batch_size), np.random.default_rng(seed), new_request_prob)

    # -- sampling ------------------------------------------------------------------------------

    def _draw(self, rng: np.random.Generator, offsets: np.ndarray) -> np.ndarray:
        """Alias draws, one per entry of ``offsets`` (= layer * E); returns global ids
        (layer * E + expert), int64, same shape as ``offsets``."""
        e = self.num_experts
        u = rng.random(offsets.shape)
        u *= e
        j = u.astype(np.int64)
        np.minimum(j, e - 1, out=j)
        u -= j
        j += offsets
        return np.where(u < self._prob[j], j, self._alias[j])

    def sample_tokens(self, rng: np.random.Generator, n: int,
                      prev: np.ndarray | None = None, keep: np.ndarray | None = None) -> np.ndarray:
        """(n, L, K) int32 expert ids of n tokens.

        ``prev`` (n, L, K) and ``keep`` (n, L, K) bool: slots to copy from ``prev`` (persistence);
        the other slots are drawn without replacement among the experts not kept.
        """
        if self._grouped is not None:    # group-limited routing (sievesim.workload.grouped)
            return self._grouped.sample(rng, n, prev, keep)
        if _kernels is not None:
            return self._sample_compiled(rng, n, prev, keep)
        return self._sample_numpy(rng, n, prev, keep)

    def _sample_compiled(self, rng: np.random.Generator, n: int, prev: np.ndarray | None,
                         keep: np.ndarray | None) -> np.ndarray:
        """:meth:`_sample_numpy` with the draws and the clash checks in C, over rows of (token,
        layer) with the slots side by side: the same uniforms in the same order, the same ids."""
        from .grouped import kept_rows, redraw_clashes
        e, num_layers, k = self.num_experts, self.num_layers, self.top_k
        rows = n * num_layers
        prev_rows, keep_rows = kept_rows(prev, keep, rows, k)
        ids = _kernels.plain_first_draws(rng.random((k, rows)).ravel(), self._prob, self._alias, num_layers, e, k,
                                         prev_rows, keep_rows)
        every_row = np.arange(rows, dtype=np.int64)

        def redraw(j: int, cand: np.ndarray) -> None:
            _kernels.plain_redraw(ids, j, cand, rng.random(cand.size), self._prob, self._alias, num_layers, e)

        def masked(j: int, cand: np.ndarray) -> None:     # a very concentrated layer: global ids, slot-major
            base = (every_row % num_layers) * e
            kept = keep_rows.T.view(np.bool_) if keep_rows.shape[0] else None
            ids[cand, j] = self._masked_draw(rng, ids.T + base[None, :], cand, j, base, kept) - base[cand]

        redraw_clashes(ids, keep_rows, every_row, redraw, masked)
        return ids.reshape(n, num_layers, k)

    def _sample_numpy(self, rng: np.random.Generator, n: int, prev: np.ndarray | None,
                      keep: np.ndarray | None) -> np.ndarray:
        """:meth:`sample_tokens` over numpy arrays (the reference the compiled path is tested against)."""
        e, num_layers, k = self.num_experts, self.num_layers, self.top_k
        rows = n * num_layers
        base = np.tile(np.arange(num_layers, dtype=np.int64) * e, n)  # (rows,) layer offsets
        # slot-major layout (k, rows): every slot is a contiguous vector
        ids = self._draw(rng, np.broadcast_to(base, (k, rows)))
        kept = None
        if prev is not None and keep is not None:
            kept = np.ascontiguousarray(keep.reshape(rows, k).T)
            prev_g = prev.reshape(rows, k).T.astype(np.int64) + base[None, :]
            ids[kept] = prev_g[kept]
        for j in range(1, k) if kept is None else range(k):
            clash = np.zeros(rows, dtype=bool)
            for i in range(k):
                if i == j:
                    continue
                if kept is None:  # slots before j are final
                    if i < j:
                        clash |= ids[i] == ids[j]
                else:  # final = earlier slots and kept slots
                    clash |= ((i < j) | kept[i]) & (ids[i] == ids[j])
            if kept is not None:
                clash &= ~kept[j]
            cand = np.flatnonzero(clash)
            attempt = 0
            while cand.size:
                if attempt >= 8:  # very concentrated layer: exact masked draw
                    ids[j, cand] = self._masked_draw(rng, ids, cand, j, base, kept)
                    break
                ids[j, cand] = self._draw(rng, base[cand])
                col = ids[j, cand]
                clash = np.zeros(cand.size, dtype=bool)
                for i in range(k):
                    if i == j:
                        continue
                    if kept is None:
                        if i < j:
                            clash |= ids[i, cand] == col
                    else:
                        clash |= ((i < j) | kept[i, cand]) & (ids[i, cand] == col)
                cand = cand[clash]
                attempt += 1
        ids -= base[None, :]
        return np.ascontiguousarray(ids.T.astype(np.int32)).reshape(n, num_layers, k)

    def _masked_draw(self, rng: np.random.Generator, ids: np.ndarray, cand: np.ndarray, j: int,
                     base: np.ndarray, kept: np.ndarray | None) -> np.ndarray:
        e, k = self.num_experts, self.top_k
        layer = base[cand] // e
        w = self.popularity[layer].copy()
        for i in range(k):
            if i == j:
                continue
            final = np.full(cand.size, i < j) if kept is None else ((i < j) | kept[i, cand])
            r = np.flatnonzero(final)
            w[r, ids[i, cand[r]] - base[cand[r]]] = 0.0
        c = np.cumsum(w, axis=1)
        u = rng.random(cand.size) * c[:, -1]
        pick = np.minimum((c <= u[:, None]).sum(axis=1), e - 1)
        return base[cand] + pick


class SyntheticStream(RoutingStream):
    """B synthetic requests advancing one token per step (see :meth:`SyntheticSource.stream`)."""

    def __init__(self, src: SyntheticSource, b: int, rng: np.random.Generator,
                 new_request_prob: float) -> None:
        self.src, self.batch_size, self.rng = src, b, rng
        self.new_request_prob = new_request_prob
        self.prev: np.ndarray | None = None
        self.request_ids = np.arange(b, dtype=np.int64)
        self.positions = np.zeros(b, dtype=np.int64)
        self._next_request = b

    def step(self) -> RoutingStep:
        src, b = self.src, self.batch_size
        rho = src.params.persistence
        if self.prev is None or rho == 0.0:
            ids = src.sample_tokens(self.rng, b)
        else:
            keep = self.rng.random(self.prev.shape) < rho
            keep[self.positions == 0] = False  # a new request has no previous token
            ids = src.sample_tokens(self.rng, b, self.prev, keep)
        out = RoutingStep(counts=counts_from_ids(ids, src.num_experts), topk_ids=ids,
                          request_ids=self.request_ids.copy(), positions=self.positions.copy())
        self.prev = ids
        self.positions += 1
        if self.new_request_prob > 0.0:
            ended = np.flatnonzero(self.rng.random(b) < self.new_request_prob)
            if ended.size:
                self.request_ids[ended] = self._next_request + np.arange(ended.size)
                self._next_request += ended.size
                self.positions[ended] = 0
        return out


# ----------------------------------------------------------------------------------------------
# presets: (E, K, L) from the model configs (../shared/reference/facts.md section 1a); shape
# parameters from `python -m sievesim.workload.fit` (targets and results in docs/workloads.md).

_SHAPES: dict[str, tuple[int, int, int]] = {
    "gpt-oss-120b": (128, 4, 36),
    "gpt-oss-20b": (32, 4, 24),
    "qwen3-30b-a3b": (128, 8, 48),
    "qwen3-235b-a22b": (128, 8, 94),
    "qwen3-next-80b-a3b": (512, 10, 48),
    "qwen3.5-397b-a17b": (512, 10, 60),
    "mixtral-8x7b": (8, 2, 32),
    "mixtral-8x22b": (8, 2, 56),
    "deepseek-v3": (256, 8, 58),
    "llama-4-maverick": (128, 1, 24),
    "deepseek-v2-lite": (64, 6, 26),
}

# Fitted shape parameters per fit group (hot_frac, cold_mass, head_sigma, tail_sigma,
# layer_spread, persistence) and what they were fitted to. BEGIN FITTED (written by fit.py)
FITTED: dict[str, tuple[tuple[float, float, float, float, float, float], str]] = {
    'gpt-oss': ((0.3573, 0.1455, 2.254, 2.644, 0.2036, 0.3817), 'Sieve paper Fig. 3/5 numbers'),
    'qwen3': ((0.4141, 0.1413, 0.5442, 1.416, 0.2743, 0.2504), 'Sieve paper Fig. 3/5 numbers'),
    'qwen3-next': ((0.4014, 0.1724, 0.4171, 0.6584, 0.1154, 0.2504), 'Sieve paper Fig. 3/5 numbers'),
    'mixtral': ((0.8714, 0.142, 0.1601, 1.391, 0.2072, 0.1663), 'Sieve paper Fig. 3/5 numbers'),
    'llama-4': ((0.4423, 0.1877, 1.26, 1.212, 0.3176, 0.2685), 'real trace llama4_maverick_mmlu.npz (distinct batches)'),
    'deepseek-v2-lite': ((0.4531, 0.6072, 0.2093, 0.4744, 0.3825, 0.1849), 'real trace deepseek_v2_lite_puffin_prefill.npz (distinct batches)'),
}
# END FITTED

# Which fit group each preset uses (models of one family share the routing shape).
PRESET_GROUP: dict[str, str] = {
    "gpt-oss-120b": "gpt-oss", "gpt-oss-20b": "gpt-oss",
    "qwen3-30b-a3b": "qwen3", "qwen3-235b-a22b": "qwen3",
    "qwen3-next-80b-a3b": "qwen3-next", "qwen3.5-397b-a17b": "qwen3-next",
    "mixtral-8x7b": "mixtral", "mixtral-8x22b": "mixtral",
    "llama-4-maverick": "llama-4",
    "deepseek-v2-lite": "deepseek-v2-lite", "deepseek-v3": "deepseek-v2-lite",
}

PRESETS: tuple[str, ...] = tuple(_SHAPES)

#: Group-limited routing of the presets that have it (``n_group``, ``topk_group`` of the HF config).
_GROUPS: dict[str, tuple[int, int]] = {"deepseek-v3": (8, 4)}


def preset_params(name: str) -> SyntheticParams:
    """:class:`SyntheticParams` of a preset (model) name; see :data:`PRESETS`."""
    key = name.lower()
    if key not in _SHAPES:
        raise field_error("synthetic model", name, "one of " + ", ".join(PRESETS))
    e, k, num_layers = _SHAPES[key]
    group = PRESET_GROUP[key]
    (hf, cm, hs, ts, ls, rho), fitted_to = FITTED[group]
    return SyntheticParams(num_experts=e, top_k=k, num_layers=num_layers, hot_frac=hf,
                           cold_mass=cm, head_sigma=hs, tail_sigma=ts, layer_spread=ls,
                           persistence=rho, fitted_to=f"{group}: {fitted_to}",
                           expert_groups=_GROUPS.get(key, (None, None))[0], top_k_groups=_GROUPS.get(key, (None, None))[1])


def source_for_model(model: Any, *, seed: int = 0, group_limited: bool = True) -> tuple["SyntheticSource", str]:
    """The calibrated synthetic routing of ``model`` and its spec string.

    A preset model (``model.name`` in :data:`PRESETS`) gets its own fitted routing
    (``synthetic:NAME``; ``top_k`` follows the model's). Any other model (a Hugging Face
    ``config.json``, a TOML file) gets the fitted shape of the preset whose expert count and top-k
    are closest (log distance) with the model's own E, K and MoE layers, named
    ``synthetic:like-PRESET``: routing statistics of a similar published model, not of this one.
    With ``group_limited`` a model's routing groups (``expert_groups``, ``top_k_groups``) limit each
    token's experts; without, the routing is drawn as for a model without groups.
    """
    e, k, layers = int(model.num_experts), int(model.top_k), int(model.num_moe_layers)
    name = str(getattr(model, "name", "")).lower()
    groups: dict[str, Any] = {"expert_groups": None, "top_k_groups": None}
    if group_limited:
        groups = {"expert_groups": getattr(model, "expert_groups", None),
                  "top_k_groups": getattr(model, "top_k_groups", None)}
    if name in _SHAPES:
        src = SyntheticSource.from_preset(name, seed=seed, top_k=k, **groups)
        return src, f"synthetic:{name}"
    near = min(_SHAPES, key=lambda p: (abs(np.log(_SHAPES[p][0] / e)) + abs(np.log(_SHAPES[p][1] / k)), p))
    params = replace(preset_params(near), num_experts=e, top_k=min(k, e), num_layers=max(layers, 1), **groups)
    return SyntheticSource(params, seed=seed, name=f"like-{near}"), f"synthetic:like-{near}"
