"""A lean forward for the Llama family (Llama, Mistral, Qwen2, Qwen3), gpt-fast style.

Hugging Face's module-per-op forward spends much of a small model's batch-1 step in Python. This
runner reuses the loaded model's weights (q/k/v and gate/up are fused once; the HF modules are
re-pointed at views of the fused tensors, so memory is not doubled and the HF model still works)
and runs a flat loop: one fused matmul per projection, SDPA over a preallocated cache.
Anything it does not recognise falls back to `HFRunner` (see `runners.make_runner`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

from draftsmith.engine.cpu_load import OtherLoad, cacheable, cpu_name
from draftsmith.engine.packing import pack_weight, packed_linear, packing_enabled
from draftsmith.engine.runner import FINAL, HiddenKey, ModelRunner, RunnerOutput, now
from draftsmith.engine.step_shapes import PAD_SLACK, check_fixed_rows
from draftsmith.paths import data_dir

SUPPORTED = {"llama", "mistral", "qwen2", "qwen3"}
STATIC_ROPE = {"default", "llama3", "linear", "yarn"}


def supports(model: torch.nn.Module) -> bool:
    """True when this lean path reproduces the HF forward exactly for the model."""
    return supports_config(model.config)


def supports_config(cfg) -> bool:
    """`supports` from a model's config alone (before its weights are loaded)."""
    if cfg.model_type not in SUPPORTED or getattr(cfg, "hidden_act", "silu") != "silu":
        return False
    if getattr(cfg, "use_sliding_window", False):
        return False
    if cfg.model_type == "mistral" and getattr(cfg, "sliding_window", None):
        return False
    rope = getattr(cfg, "rope_parameters", None) or getattr(cfg, "rope_scaling", None) or {}
    if rope.get("rope_type", rope.get("type", "default")) not in STATIC_ROPE:
        return False
    return not getattr(cfg, "mlp_bias", False)


class Fused:
    """Several Linear layers fused into one matmul, kept in one, two or a packed memory layout.

    On CPU, x @ W with W stored [in, out] runs a few-row matmul (decode, short verify) about twice
    as fast as F.linear with W stored [out, in], while from ~5 rows on, the [out, in] GEMM is faster
    (MKL picks different kernels; numbers in docs/BENCHMARKS.md). `dual` keeps both layouts (2x
    weight memory) so each step can use the faster one. `packed` keeps oneDNN's blocked copy
    instead (`pack_weight`), which beats both at every row count measured (1-256) and makes a step
    of 8 rows cost little more than one; then the layout argument is moot. The HF modules are
    re-pointed at views of the fused tensors, so the HF model keeps working without another copy.
    """

    def __init__(self, modules: list[torch.nn.Module], dual: bool, packed: bool = False) -> None:
        w = torch.cat([m.weight.detach() for m in modules]).contiguous()
        has_bias = all(getattr(m, "bias", None) is not None for m in modules)
        self.b = torch.cat([m.bias.detach() for m in modules]).contiguous() if has_bias else None
        self.packed = pack_weight(w) if packed else None
        if self.packed is not None:  # one dense copy, [out, in], for the HF modules' views
            self.w, self.w_t = w, w.t()  # w_t: a view, read only for its dtype and device
        else:
            self.w_t = w.t().contiguous()
            self.w = w if dual else None
        start = 0
        for m in modules:
            rows = m.weight.shape[0]
            view = w[start : start + rows] if self.w is not None else self.w_t[:, start : start + rows].t()
            m.weight = torch.nn.Parameter(view, requires_grad=False)
            if has_bias:
                m.bias = torch.nn.Parameter(self.b[start : start + rows], requires_grad=False)
            start += rows

    def __call__(self, x: torch.Tensor, row_major: bool = False) -> torch.Tensor:
        if self.packed is not None:
            y = packed_linear(x, self.packed)
        elif row_major and self.w is not None:
            return F.linear(x, self.w, self.b)
        else:
            y = x @ self.w_t
        return y if self.b is None else y + self.b


HEAD_SMALL = 3
"""Rows up to which the lm_head runs in the [in, out] layout whatever the step's layers use: its
vocabulary-wide output makes that layout win by far more than on the layers (SmolLM2 on this 2-core
CPU: 3.9 ms against 6.7 for one row, 11.5 against 19.7 for three; [out, in] wins from four rows;
docs/experiments.md)."""

CALIBRATION_VERSION = 2
"""In the calibration cache key: plans from an older measurement are measured again (before 2, each
shape was timed in one burst, and the lm_head followed the layers' layout)."""

KV_BLOCK = 512
"""Key-window granularity of fixed-shape steps. CPU SDPA walks keys in blocks of this size, so a
window rounded up to it gives every query the same blocks whatever its row in the step (a
masked-out trailing block adds exact zeros); an unrounded window changes the tail and the bits."""


def round_up(n: int, block: int) -> int:
    return -(-n // block) * block


class LeanLlamaRunner(ModelRunner):
    """Lean batch-1 forward. `plan[n] = (rows, row_major)`: how an n-token step is executed.

    Padding a step with copies of its last token leaves the real rows unchanged in exact
    arithmetic (attention is causal and the padded K/V lie beyond the cache length), so in fp32 a
    plan only changes speed; in bf16 the step shape changes the rounding (see `set_fixed_rows`). `calibrate`
    measures the step time for each shape on this machine and picks the fastest plan per n; the
    measured table is also what a hardware-aware drafter or the planner can read (`step_cost`).
    """

    def __init__(self, model: torch.nn.Module, dual: bool | None = None, packed: bool | None = None) -> None:
        super().__init__(model)
        base = model.model
        first = base.layers[0].self_attn
        self.n_heads = int(self.config.num_attention_heads)
        self.n_kv = int(self.config.num_key_value_heads)
        self.head_dim = int(first.head_dim)
        self.eps = float(self.config.rms_norm_eps)
        device = base.embed_tokens.weight.device
        # a second copy of the weights (both dense layouts, or dense + packed) pays off on CPU;
        # keep memory flat for big models (it would double) and on GPUs
        n_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
        second_copy = device.type == "cpu" and n_bytes <= 4 * 2**30
        if dual is None:
            dual = second_copy
        if packed is None:  # oneDNN-packed weights on CPU (fp32): faster at every step size measured
            packed = packing_enabled() and second_copy
        self.embed = base.embed_tokens
        self.norm_w = base.norm.weight
        head = model.get_output_embeddings()
        tied = head.weight is self.embed.weight
        self.lm_head = Fused([head], dual, packed)
        if tied:
            self.embed.weight = head.weight
        self.rotary = base.rotary_emb
        self.layers = []
        for layer in base.layers:
            a, mlp = layer.self_attn, layer.mlp
            self.layers.append(
                dict(
                    ln1=layer.input_layernorm.weight,
                    qkv=Fused([a.q_proj, a.k_proj, a.v_proj], dual, packed),
                    q_norm=getattr(a, "q_norm", None),
                    k_norm=getattr(a, "k_norm", None),
                    o=Fused([a.o_proj], dual, packed),
                    ln2=layer.post_attention_layernorm.weight,
                    gate_up=Fused([mlp.gate_proj, mlp.up_proj], dual, packed),
                    down=Fused([mlp.down_proj], dual, packed),
                )
            )
        self.packed = self.lm_head.packed is not None  # what the weights really are
        self.dual = self.lm_head.w is not None and not self.packed
        self.plan: dict[int, tuple[int, bool]] = {}
        self.measured_cost: dict[int, float] = {}  # calibrated seconds per free n-token step
        self.mixed_shapes = False  # fixed-path steps take the cheapest exact shape per size (set_mixed_rows)
        self.mixed_least = 2  # with mixed shapes, steps of fewer tokens run as this many
        self._mixed_exact: dict[int, bool] = {}  # probe results per max rows (saved with the calibration)
        self.k_cache: torch.Tensor | None = None
        self.v_cache: torch.Tensor | None = None

    def _allocate(self, capacity: int) -> None:
        p = self.lm_head.w_t
        rows = capacity + PAD_SLACK
        if self.fixed_rows:  # the rounded key window must fit; zeros so masked keys stay finite
            rows = round_up(rows, KV_BLOCK)
        shape = (len(self.layers), 1, self.n_kv, rows, self.head_dim)
        self.k_cache = torch.zeros(shape, dtype=p.dtype, device=p.device)
        self.v_cache = torch.zeros(shape, dtype=p.dtype, device=p.device)
        pos = torch.arange(rows, device=p.device)[None]
        dummy = torch.empty(1, dtype=torch.float32, device=p.device)
        cos, sin = self.rotary(dummy, pos)
        self.cos, self.sin = cos[0].to(p.dtype), sin[0].to(p.dtype)

    def set_fixed_rows(self, rows: int) -> None:
        """Batch-invariant steps: every step of up to `rows` tokens runs as exactly `rows` rows.

        In bf16 a token's logits depend on how many rows its step had (the matmul and attention
        kernels round differently per shape), so a verify step of 4 tokens and a plain 1-token
        step disagree now and then and speculative output drifts from plain output. With one
        step shape (same rows, same layout, a key window rounded to KV_BLOCK, logits over all
        rows) each row's result depends only on its own token and position, so every method
        reproduces plain decoding bit for bit. Longer steps (prefill) run as they are: plain and
        speculative decoding share the same prefill. The engine caps drafts at rows - 1 tokens.
        Where reduced-precision verify steps of a few rows cost about the same as one (bf16 on CPUs
        with native bf16), this buys exactness for ~10% of plain speed. 0 turns it off.
        """
        self.fixed_rows = check_fixed_rows(rows)
        self.mixed_shapes = False
        self.capacity = 0  # reallocate: the cache must hold the rounded window
        self._derive_step_cost()

    def set_mixed_rows(self, rows: int, least: int = 2) -> bool:
        """Fixed-path steps of up to `rows` tokens, each run as the cheapest calibrated shape of at least
        `least` rows, where this machine's kernels give every shape the same per-row bits.

        `set_fixed_rows` buys exactness with one shape for every step, so a long draft costs no more
        to verify than a short one but no draft can be longer than rows - 1, and plain decoding pays
        the shape too. On CPUs whose bf16 kernels compute each row of a step of 2..16 rows alike (the
        2-core Xeon with AMX: every shape bitwise equal, at contexts across key-block
        edges), steps can take their own calibrated shape instead: the step-cost table is real
        again, so the draft-length policy verifies 6 drafts where they pay and 1 where they do not.
        One-token steps never take the one-row path (no mask, an unrounded window: other bits); with
        `least` = the single shape (the default picks 4), plain decoding and drafts that fit it run
        exactly as before and only longer drafts take new shapes.
        Probed here (`mixed_shapes_exact`); where the probe fails, nothing changes and False comes back.
        """
        rows, least = check_fixed_rows(rows), check_fixed_rows(least)
        if not rows or not least or not self.measured_cost or not self.mixed_shapes_exact(rows):
            return False
        self.fixed_rows, self.mixed_shapes, self.mixed_least = rows, True, min(least, rows)
        self.capacity = 0
        self._derive_step_cost()
        return True

    def _fixed_shape(self, n: int) -> tuple[int, bool]:
        """(rows, layout) a fixed-path step of n tokens runs as: the calibrated plan for fixed_rows
        tokens, or with mixed shapes the plan for max(n, mixed_least) tokens."""
        m = max(n, self.mixed_least) if self.mixed_shapes else self.fixed_rows
        return self.plan.get(m, (m, self.row_major(m)))

    def _derive_step_cost(self) -> None:
        """The cost table the draft-length policy reads: measured, flat under one fixed shape, or the
        measured cost of each size's shape under mixed shapes."""
        cost = self.measured_cost
        if self.fixed_rows and cost:
            if self.mixed_shapes:
                cost = {n: cost[max(n, self.mixed_least)] for n in range(1, self.fixed_rows + 1)}
            else:
                flat = cost.get(self.fixed_rows, max(cost.values()))
                cost = {n: flat for n in range(1, self.fixed_rows + 1)}
        self.step_cost = dict(cost)

    def mixed_shapes_exact(self, rows: int) -> bool:
        """Whether mixed shapes of up to `rows` rows keep every row's bits here (`_probe_mixed`); probed
        once per calibrated plan and kept with it on disk."""
        if rows not in self._mixed_exact:
            self._mixed_exact[rows] = self._probe_mixed(rows)
            self._save_mixed_exact()
        return self._mixed_exact[rows]

    @torch.inference_mode()
    def _probe_mixed(self, rows: int, contexts: tuple[int, ...] = (37, KV_BLOCK - 3)) -> bool:
        """Every step size 1..rows run as its mixed shape against the same tokens run as the single
        `rows` shape: bitwise equal logits and final states? (Random tokens after a prefill of each
        context length; the second puts the padded rows of long steps across a key-block edge.)"""
        saved = self.fixed_rows, self.mixed_shapes, self.mixed_least
        g = torch.Generator().manual_seed(0)
        try:  # every shape from 2 rows: a verdict that holds for any `least`
            self.fixed_rows, self.mixed_least = rows, 2
            self.capacity = 0
            self.reset(max(contexts) + 2 * PAD_SLACK)
            for ctx in contexts:
                prompt = torch.randint(self.vocab_size, (ctx,), generator=g, device=self.device)
                step = torch.randint(self.vocab_size, (rows,), generator=g, device=self.device)
                self.length = 0
                self.forward(prompt, n_logits=0)
                for n in range(1, rows + 1):
                    outs = []
                    for mixed in (False, True):
                        self.mixed_shapes = mixed
                        out = self.forward(step[:n], n_logits=n, hidden=(FINAL,))
                        self.rollback(ctx)
                        outs.append((out.logits, out.hidden[FINAL]))
                    (a, fa), (b, fb) = outs
                    if not (torch.equal(a, b) and torch.equal(fa, fb)):
                        return False
            return True
        finally:  # the probe's cache is sized for it: the next reset allocates afresh
            self.fixed_rows, self.mixed_shapes, self.mixed_least = saved
            self.capacity = self.length = 0

    def row_major(self, rows: int) -> bool:
        """Weight layout for a step of `rows` rows: the calibrated choice, else [out, in] for long
        steps (that GEMM layout wins from a few rows on) when the runner keeps both layouts."""
        planned = self.plan.get(rows)
        return planned[1] if planned else self.dual and rows > 16

    def logits(self, normed: torch.Tensor) -> torch.Tensor:
        """The lm_head over final-norm rows [n, H], in the layout that is faster for n rows."""
        return self.lm_head(normed, normed.shape[0] > HEAD_SMALL)

    def _rms(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],), w, self.eps)

    @staticmethod
    def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x1, x2 = x.chunk(2, dim=-1)
        return x * cos + torch.cat((-x2, x1), dim=-1) * sin

    def decoder(
        self,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        mask: torch.Tensor | None,
        row_major: bool,
        store: Callable[[int, torch.Tensor, torch.Tensor], None],
        window: Callable[[int], tuple[torch.Tensor, torch.Tensor]],
        keep: tuple[HiddenKey, ...] = (),
        real: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, dict[HiddenKey, torch.Tensor]]:
        """The decoder stack over x [b, n, H], shared by this runner and the batched sampler.

        store(i, k, v) writes layer i's new keys and values ([b, n_kv, n, head_dim]) into the
        caller's cache; window(i) returns the keys and values the queries attend over. Returns the
        last hidden state and the states listed in `keep` (0 = embeddings, i = output of layer i).
        real: the flat indices (into b * n) of the rows that matter in a ragged batch; the matmuls
        then run on those rows only and padded rows come out as garbage (zeros from the
        projections), so a step costs its real rows, not b x its longest row.
        """
        b, n, _ = x.shape
        nh, nkv, hd = self.n_heads, self.n_kv, self.head_dim
        kept = {0: x} if 0 in keep else {}

        def rows(fn: Callable[[torch.Tensor], torch.Tensor], t: torch.Tensor) -> torch.Tensor:
            if real is None:
                return fn(t)
            y = fn(t.reshape(b * n, -1).index_select(0, real))
            return y.new_zeros(b * n, y.shape[-1]).index_copy_(0, real, y).view(b, n, -1)

        for i, w in enumerate(self.layers):
            h = rows(lambda t, w=w: w["qkv"](self._rms(t, w["ln1"]), row_major), x)
            q, k, v = h.split([nh * hd, nkv * hd, nkv * hd], dim=-1)
            q, k = q.view(b, n, nh, hd), k.view(b, n, nkv, hd)
            if w["q_norm"] is not None:
                q, k = w["q_norm"](q), w["k_norm"](k)
            q = self._rotate(q.transpose(1, 2), cos, sin)
            store(i, self._rotate(k.transpose(1, 2), cos, sin), v.view(b, n, nkv, hd).transpose(1, 2))
            k_all, v_all = window(i)
            att = F.scaled_dot_product_attention(q, k_all, v_all, attn_mask=mask, enable_gqa=nh != nkv)
            x = x + rows(lambda t, w=w: w["o"](t, row_major), att.transpose(1, 2).reshape(b, n, nh * hd))
            x = x + rows(lambda t, w=w: self._mlp(w, t, row_major), x)
            if i + 1 in keep:
                kept[i + 1] = x
        return x, kept

    def _mlp(self, w: dict, x: torch.Tensor, row_major: bool) -> torch.Tensor:
        gate, up = w["gate_up"](self._rms(x, w["ln2"]), row_major).chunk(2, dim=-1)
        return w["down"](F.silu(gate) * up, row_major)

    def span_step(
        self,
        ids: torch.Tensor,
        start: int,
        keys: int,
        cache: Callable[[int], tuple[torch.Tensor, torch.Tensor]],
        cos: torch.Tensor,
        sin: torch.Tensor,
        row_major: bool,
        hidden: tuple[HiddenKey, ...],
    ) -> tuple[torch.Tensor, dict[HiddenKey, torch.Tensor]]:
        """Decode `ids` [1, n] at positions start.. of one contiguous cache (`cache(layer)` gives its
        [1, kv, T, hd] K and V), attending to the first `keys` slots. Shared by this runner and a lone
        slot of the batched one, so both take the same fast path: slices, no mask for one token."""
        n = ids.shape[1]
        end = start + n
        # a query at position start+i sees keys 0..start+i (SDPA's is_causal aligns top-left, so build it)
        mask = None if n == 1 else torch.ones(n, keys, dtype=torch.bool, device=ids.device).tril(start)

        def store(i: int, k: torch.Tensor, v: torch.Tensor) -> None:
            kc, vc = cache(i)
            kc[:, :, start:end], vc[:, :, start:end] = k, v

        def window(i: int) -> tuple[torch.Tensor, torch.Tensor]:
            kc, vc = cache(i)
            return kc[:, :, :keys], vc[:, :, :keys]

        x = self.embed(ids)
        return self.decoder(x, cos[start:end], sin[start:end], mask, row_major, store, window, hidden)

    def _forward(self, ids: torch.Tensor, n_logits: int, hidden: tuple[HiddenKey, ...]) -> RunnerOutput:
        n_real = ids.shape[1]
        fixed = 0 < n_real <= self.fixed_rows
        if fixed:
            rows, row_major = self._fixed_shape(n_real)
        else:
            rows, row_major = self.plan.get(n_real, (n_real, self.row_major(n_real)))
        if rows > n_real:
            ids = torch.cat([ids, ids[:, -1:].expand(1, rows - n_real)], dim=1)
        n, start = ids.shape[1], self.length
        keys = round_up(start + n, KV_BLOCK) if fixed else start + n
        cache = lambda i: (self.k_cache[i], self.v_cache[i])  # noqa: E731
        x, kept = self.span_step(ids, start, keys, cache, self.cos, self.sin, row_major, hidden)
        out: dict[HiddenKey, torch.Tensor] = {key: h[0, :n_real] for key, h in kept.items()}
        logits = None
        if n_logits or FINAL in hidden:
            normed = self._rms(x[0] if fixed else x[0, :n_real], self.norm_w)
            if FINAL in hidden:
                out[FINAL] = normed[:n_real]
            if n_logits and fixed:  # every row through the lm_head, so its matmul shape never varies
                logits = self.lm_head(normed, row_major)[n_real - n_logits : n_real]
            elif n_logits:
                logits = self.logits(normed[n_real - n_logits :])
        return RunnerOutput(logits, out)

    @torch.inference_mode()
    def calibrate(self, max_rows: int = 16, context: int = 128, repeats: int = 5) -> dict[int, float]:
        """Time one step of each shape; set the fastest plan per n; return seconds per n-token step.

        The shapes are swept `repeats` times and each keeps its fastest time: a busy spell of the
        machine then hits one sample of every shape, not all samples of one (timed shape by shape
        while another job ran, the 1-token plan once picked the layout 17% slower)."""
        layouts = (False, True) if self.dual else (False,)
        fixed, self.fixed_rows = self.fixed_rows, 0  # time the free shapes; a fixed plan is built on them
        old_plan, self.plan = self.plan, {}
        try:
            self.reset(max(self.capacity, context + max_rows))
            self.forward(torch.zeros(context, dtype=torch.long), n_logits=0)
            times: dict[tuple[int, bool], float] = {}
            for _ in range(repeats):
                for rows in range(1, max_rows + 1):
                    for row_major in layouts:
                        self.plan = {rows: (rows, row_major)}
                        t0 = now(self.device)
                        self.forward(torch.zeros(rows, dtype=torch.long), n_logits=rows)
                        t = now(self.device) - t0
                        self.rollback(context)
                        shape = (rows, row_major)
                        times[shape] = min(times.get(shape, t), t)  # noise only ever adds time
            plan, cost = {}, {}
            for n in range(1, max_rows + 1):
                best = min((t, shape) for shape, t in times.items() if shape[0] >= n)
                cost[n], plan[n] = best
            old_plan = plan
            self.measured_cost = cost
            self._mixed_exact = {}  # probed on the old plan
        finally:  # an interrupted calibration must not leave fixed shapes off (bf16 would drift)
            self.plan, self.length = old_plan, 0
            self.fixed_rows = fixed
            self.capacity = 0
            self._derive_step_cost()
        return cost

    def _calibration_file(self) -> tuple[dict, Path]:
        """(key, path) of this model shape's calibration on this machine and library version."""
        key = {
            "version": CALIBRATION_VERSION,
            "config": {k: v for k, v in self.config.to_dict().items() if "name" not in k},
            "dtype": str(self.lm_head.w_t.dtype),
            "device": str(self.device),
            "dual": self.dual,
            "packed": self.packed,
            "threads": torch.get_num_threads(),
            "torch": torch.__version__,
            "cpu": cpu_name(),
        }
        digest = hashlib.sha1(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]
        return key, data_dir() / "calibration" / f"{digest}.json"

    def calibrate_cached(self, force: bool = False) -> dict[int, float]:
        """`calibrate` once per model shape, machine and library version; reuse the table after."""
        key, path = self._calibration_file()
        try:
            if force:
                raise OSError("recalibrate")
            saved = json.loads(path.read_text())
            self.plan = {int(n): (int(r), bool(m)) for n, (r, m) in saved["plan"].items()}
            self.measured_cost = {int(n): float(t) for n, t in saved["cost"].items()}
            self._mixed_exact = {int(r): bool(v) for r, v in saved.get("mixed_exact", {}).items()}
            self._derive_step_cost()
            return self.measured_cost
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pass
        with OtherLoad() as load:
            cost = self.calibrate()
        if not cacheable(load, "the step costs", "draftsmith calibrate --force"):
            return cost
        _write_json(path, {"key": key, "plan": self.plan, "cost": cost})
        return cost

    def _save_mixed_exact(self) -> None:
        """Keep the shape probe's verdicts next to the plan they were probed on (a recalibration
        rewrites the file without them, so a new plan is probed again)."""
        _, path = self._calibration_file()
        try:
            saved = json.loads(path.read_text())
            same_plan = {int(n): (int(r), bool(m)) for n, (r, m) in saved["plan"].items()} == self.plan
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return
        if same_plan:
            saved["mixed_exact"] = {str(r): v for r, v in self._mixed_exact.items()}
            _write_json(path, saved)


def _write_json(path: Path, data: dict) -> None:
    """Write atomically; a cache that cannot be written is only a cache."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, default=str))
        tmp.replace(path)
    except OSError:
        pass


AUTO_FIXED_ROWS = 4
"""The fixed step shape for reduced precision on CPU: 4 rows, i.e. drafts of up to 3 tokens. Plain
decoding pays the shape on every step, while drafts past the third are rarely accepted (DSpark's
acc@4 is ~0.1). Measured on the 2-core Xeon (bf16 packed; 16 prompts x 2 rounds, 128 tokens;
docs/experiments.md): 4 rows made plain 1.20x and DSpark 1.56x
fp32 plain, 6 rows 1.09x and 1.42x, 8 rows 1.04x and 1.35x. The calibrated table alone cannot
pick it: a 4-row step read 1.01x and 1.11x a one-token step in two calibrations an hour apart."""

FIXED_ROWS_MAX_COST = 1.25
"""Where the table says a 4-row step costs more than this times a one-token step (bf16 without
native support), the fixed shape falls back to 2 rows."""


def auto_fixed_rows(runner: ModelRunner) -> int:
    """The fixed step shape to use when none is asked for: AUTO_FIXED_ROWS for reduced precision on
    CPU (2 where the table prices that step above FIXED_ROWS_MAX_COST one-token steps); fp32 is
    already reproducible across step shapes here, and GPU kernels are not yet verified, so 0. Only
    the lean runner has fixed shapes."""
    if not isinstance(runner, LeanLlamaRunner) or runner.device.type != "cpu":
        return 0
    if runner.lm_head.w_t.dtype == torch.float32:
        return 0
    cost = runner.measured_cost
    n = AUTO_FIXED_ROWS
    if cost and n in cost and cost[n] > FIXED_ROWS_MAX_COST * cost[1]:
        return 2
    return n
