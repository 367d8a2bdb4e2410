"""The cost model of speculative decoding as pure functions (Leviathan et al. 2023, the roofline).

Each docstring states its formula in words; the plan prints the same words next to each number.
Units: bytes, seconds, bytes/s, FLOP/s. Acceptance curves come in two forms, named everywhere:
- conditional: c_i = P(draft position i accepted | positions before i accepted)
- cumulative: s_i = P(positions 1..i all accepted), the prefix survival (= c_1 x ... x c_i);
  `draftsmith bench` reports this one per position (accepted_at / drafted_at).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

TILE_ROWS = 128  # the M dimension of a tensor-core MMA tile that decode attention kernels fill


def kv_bytes(
    layers: int, context: float, kv_heads: int, head_dim: int, bytes_per_value: float = 2.0
) -> float:
    """KV cache of one sequence: 2 (K and V) x layers x context tokens x KV heads x head dim x bytes."""
    return 2 * layers * context * kv_heads * head_dim * bytes_per_value


def step_time(
    weight_bytes: float,
    kv_bytes_per_seq: float,
    batch: int,
    tokens_per_seq: int,
    active_params: float,
    bandwidth: float,
    flops: float | None = None,
) -> float:
    """Roofline time of one forward step: the larger of the memory time, (weight bytes + batch x KV
    bytes) / bandwidth, and the compute time, 2 x active params x batch x tokens per sequence / FLOP/s
    (memory time only when FLOP/s is unknown)."""
    memory = (weight_bytes + batch * kv_bytes_per_seq) / bandwidth
    if flops is None:
        return memory
    return max(memory, 2 * active_params * batch * tokens_per_seq / flops)


def ridge_tokens(
    weight_bytes: float,
    kv_bytes_per_seq: float,
    batch: int,
    active_params: float,
    bandwidth: float,
    flops: float,
) -> float:
    """Tokens per step (over the whole batch) at which compute time reaches memory time: memory time
    x FLOP/s / (2 x active params). Below it, verifying more tokens is nearly free."""
    memory = (weight_bytes + batch * kv_bytes_per_seq) / bandwidth
    return memory * flops / (2 * active_params)


def tile_k_max(group: int, tile_rows: int = TILE_ROWS) -> int:
    """Tile rule: the G query heads sharing a KV head times the k+1 verified positions fill the
    tile's 128 rows, so drafts are nearly free while G x (k+1) <= 128: k_max = floor(128 / G) - 1."""
    if group < 1:
        raise ValueError(f"G must be >= 1, got {group}")
    return max(0, tile_rows // group - 1)


def free_draft_length(tile_k: int, ridge: float | None, batch: int) -> int:
    """Draft length that stays nearly free at a concurrency: the tile rule's k, cut to keep the
    batch's verified tokens B x (k+1) under the ridge point: min(tile k, floor(ridge / B) - 1)."""
    if ridge is None:
        return tile_k
    return max(0, min(tile_k, math.floor(ridge / batch) - 1))


def leviathan_expected(a: float, k: int) -> float:
    """Leviathan et al.: expected tokens per verify round with a constant acceptance rate a and k
    drafts, bonus token included: E = (1 - a^(k+1)) / (1 - a) (k + 1 when a = 1)."""
    if not 0 <= a <= 1:
        raise ValueError(f"acceptance rate must be in [0, 1], got {a}")
    if a == 1:
        return k + 1.0
    return (1 - a ** (k + 1)) / (1 - a)


def survival(curve: Sequence[float], kind: str = "conditional") -> list[float]:
    """Prefix survival s_i from a curve: products of the conditional rates, or the cumulative curve
    itself (clipped so it never rises: a prefix cannot survive more often than a shorter one)."""
    if kind not in ("conditional", "cumulative"):
        raise ValueError(f"curve kind must be conditional or cumulative, got {kind!r}")
    out, s = [], 1.0
    for c in curve:
        if not 0 <= c <= 1:
            raise ValueError(f"acceptance values must be in [0, 1], got {c}")
        s = s * c if kind == "conditional" else min(s, c)
        out.append(s)
    return out


def conditional_from_cumulative(cumulative: Sequence[float]) -> list[float]:
    """c_i = s_i / s_(i-1) (1 after a zero survival, which no longer matters)."""
    s = survival(cumulative, "cumulative")
    prev = [1.0, *s[:-1]]
    return [min(1.0, a / p) if p > 0 else 0.0 for a, p in zip(s, prev, strict=True)]


def expected_tokens(
    curve: Sequence[float], k: int, kind: str = "conditional", draft_rate: float = 1.0
) -> float:
    """Expected tokens per verify round: 1 (the bonus) + draft rate x sum over positions i <= k of the
    prefix survival s_i. Draft rate: the share of rounds that draft at all (n-gram needs a match)."""
    if k > len(curve):
        raise ValueError(f"the curve has {len(curve)} positions, asked for k={k}")
    return 1.0 + draft_rate * sum(survival(curve[:k], kind))


def fit_constant_rate(tau: float, k: int) -> float:
    """The constant acceptance rate a whose Leviathan E at k drafts equals a measured tau (bisection)."""
    if not 1 <= tau <= k + 1:
        raise ValueError(f"tau must be in [1, k+1] = [1, {k + 1}], got {tau}")
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if leviathan_expected(mid, k) < tau else (lo, mid)
    return (lo + hi) / 2


def speedup(expected: float, t_plain: float, t_draft: float, t_verify: float) -> float:
    """S = E x T_target(1) / (drafting time per round + T_verify(k+1)): tokens per second with
    speculation over tokens per second without."""
    return expected * t_plain / (t_draft + t_verify)


def best_draft_length(
    curve: Sequence[float],
    k_limit: int,
    t_plain: float,
    draft_time: Callable[[int], float],
    verify_time: Callable[[int], float],
    kind: str = "conditional",
    draft_rate: float = 1.0,
) -> tuple[int, float, float]:
    """Scan k = 0..k_limit and keep the k with the highest speedup; returns (k, E, speedup). With a
    draft rate below 1 the rounds without a draft verify one token: time = rate x T(k+1) + rest x T(1)."""
    best = (0, 1.0, 1.0)
    for k in range(1, min(k_limit, len(curve)) + 1):
        e = expected_tokens(curve, k, kind, draft_rate)
        t_round = draft_rate * (draft_time(k) + verify_time(k + 1)) + (1 - draft_rate) * verify_time(1)
        s = e * t_plain / t_round
        if s > best[2]:
            best = (k, e, s)
    return best


def cpu_memory_tok_s(
    cpu_bytes_per_token: float, channels: int, per_channel_gbs: float, efficiency: float
) -> float:
    """Offload decode bound from CPU memory: efficiency x channels x GB/s per channel / CPU-resident
    bytes read per token."""
    if cpu_bytes_per_token <= 0:
        return math.inf
    return efficiency * channels * per_channel_gbs * 1e9 / cpu_bytes_per_token


def pcie_tok_s(bytes_per_token: float, link_gbs: float, factor: float = 1.0) -> float:
    """Offload decode bound from PCIe: link GB/s per direction x planning factor / bytes crossing per
    token (the article: ~0.5 GB per token, so PCIe 3.0 x16 caps near 32 tok/s)."""
    if bytes_per_token <= 0:
        return math.inf
    return link_gbs * factor * 1e9 / bytes_per_token
