"""Inference for DFlash / DSpark: one parallel block pass per round over an append-only context cache.

The context cache holds each draft layer's projected keys/values of the target features of
committed positions. Committed positions never change, so nothing is rolled back: `accept`
appends the states the engine hands over from its verify pass. DSpark then walks the block
serially through the cheap Markov head and records each slot's confidence, which a threshold can
use to stop the draft early (prefix survival prod c_k below the threshold).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from draftsmith.drafters.checkpoint import read_sts, shipped_drafter, sts_confidence
from draftsmith.drafters.dflash.checkpoint import load_drafter
from draftsmith.drafters.dflash.lookup import drop_lookup, slot_guesses
from draftsmith.drafters.dflash.model import DFlashModel
from draftsmith.drafters.dflash.recipe import DFlashRecipe
from draftsmith.drafters.dflash.vocab import DEFAULT_CUT, cut_vocab, default_cut
from draftsmith.drafters.options import TrainedDecodeOptions
from draftsmith.engine import drafter as base
from draftsmith.engine.draft_length import LENGTH_RULES
from draftsmith.engine.drafter import Draft, Drafter, merge_states, state_bytes
from draftsmith.engine.packing import for_decoding
from draftsmith.engine.sampling import SamplingParams, draft_choice
from draftsmith.errors import DraftsmithError


@dataclass(frozen=True)
class DFlashDecodeOptions(TrainedDecodeOptions):
    """DFlash's and DSpark's decoding options (`DFlashDrafter.options`)."""

    confidence_threshold: float = field(
        default=0.0,
        metadata={"help": "DSpark: stop a draft once the predicted prefix survival falls below this"},
    )
    length_rule: str = field(
        default="prob",
        metadata={
            "help": "where a step's rows cost (fp32 on a CPU): shorten each draft by the drafter's own "
            "probabilities of its tokens after drafting ('prob'; the hybrid's lookup drafts count as "
            "sure) or by the request's running acceptance alone ('history', as every other method)",
            "choices": LENGTH_RULES,
            "per_method": True,
        },
    )

    lookup: bool = field(
        default=True,
        metadata={
            "help": "a drafter trained with the prompt-lookup input reads its guesses (--no-lookup: "
            "drafts as its export without that input does, in every other engine)"
        },
    )
    draft_vocab: int | None = field(
        default=None,
        metadata={
            "help": "cut the drafter's head to the N tokens its training answers held most often "
            f"(FR-Spec; counts stored with the drafter), so a whole-vocabulary drafter drafts cheaply; "
            f"0 = every token it has. Default: {DEFAULT_CUT} where the drafter carries counts of at least "
            "that many distinct tokens",
            "per_method": True,
        },
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.draft_vocab is not None and self.draft_vocab < 0:
            raise DraftsmithError(f"draft vocabulary must be >= 0 (0 = no cut), got {self.draft_vocab}")
        if not 0 <= self.confidence_threshold <= 1:
            raise DraftsmithError(f"confidence threshold must be in [0, 1], got {self.confidence_threshold}")
        if self.length_rule not in LENGTH_RULES:
            rules = ", ".join(LENGTH_RULES)
            raise DraftsmithError(f"length rule must be one of {rules}: {self.length_rule!r}")


def decoding_view(model: DFlashModel, lookup: bool, draft_vocab: int | None) -> DFlashModel:
    """The drafter as this decode runs it: without its lookup input (`lookup` False) and with its head
    cut to the most frequent tokens (`draft_vocab`; None = `vocab.default_cut`). A copy where anything
    changes; the model itself otherwise."""
    out = model
    if not lookup:
        out = drop_lookup(out)
    vd = int(out.d2t.shape[0])
    size = draft_vocab
    if size is None:
        size = default_cut(out.token_counts, vd)
    if size and size < vd:
        out = cut_vocab(out, size)
    return out


class DFlashDrafter(Drafter):
    name = "dflash"
    description = "DFlash block diffusion drafter (one parallel pass per block; needs a trained drafter)"
    recipe = DFlashRecipe("dflash")
    options = DFlashDecodeOptions
    export_formats = ("speculators", "zlab", "deepspec", "gguf")

    @classmethod
    def owns(cls, path: Path, config: dict | None) -> bool:
        """Draftsmith's own DFlash/DSpark format; exports of either are read by DFlash's loader."""
        if not config:
            return False
        if str(config.get("format", "")).startswith("draftsmith-dflash/"):
            return (config.get("method") == "dspark") == (cls.name == "dspark")
        if cls.name != "dflash":  # an export of either: DFlash's loader reads both
            return False
        if "speculators_model_type" in config:  # speculators also holds other methods
            return config["speculators_model_type"] in ("dflash", "dspark")
        from draftsmith.export import detect_format

        try:
            return detect_format(path) is not None
        except DraftsmithError:
            return False

    @classmethod
    def export(cls, directory: Path, fmt: str, out: Path, target, verifier) -> Path:
        from draftsmith.export import export_drafter, stored_dtype

        model = load_drafter(directory, target, dtype=stored_dtype(directory))
        return export_drafter(model, fmt, out, verifier)

    def __init__(
        self,
        model: DFlashModel,
        target_vocab: int,
        confidence_threshold: float = 0.0,
        temperatures: tuple[float, ...] = (),
        biases: tuple[float, ...] = (),
        length_rule: str | None = None,
    ) -> None:
        self.model = model
        self.cfg = model.cfg
        self.hidden_layers = tuple(self.cfg.target_layers)
        self.first_slot = 0 if self.cfg.sample_from_anchor else 1  # z-lab layout: slot 0 drafts nothing
        self.default_k = self.cfg.block_size - self.first_slot
        self.target_vocab = target_vocab
        self.threshold = confidence_threshold
        # "prob" (cut by the drafted tokens' probabilities, drafting the history length + 1 first) is the
        # default: 1.20x against 1.16x for "history" in an earlier interleaved bench (2-core AVX2, fp32)
        rule = "prob" if length_rule is None else length_rule
        if rule not in LENGTH_RULES:
            raise DraftsmithError(f"length rule must be one of {', '.join(LENGTH_RULES)}: {rule!r}")
        self.length_rule = rule  # how speculative_generate shortens a draft where rows cost
        self.token_probs: list[float] = []  # this round's: the drafter's probability of each drafted token
        self.confidences: list[float] = []
        self.confidence_logits: list[float] = []  # raw, before STS
        self.temperatures = tuple(temperatures)  # STS, per slot (1.0 beyond the fitted ones)
        self.biases = tuple(biases)  # logit offsets fitted with them (0.0 beyond)
        self.n_ctx = 0
        # optional: (context, target ids drafted so far) -> (target id, logit bonus) for the next
        # slot, or None
        self.slot_hint: Callable[[torch.Tensor, list[int]], tuple[int, float] | None] | None = None
        self.pending: list[dict] = []
        self.pending_bytes = 0
        self.lean_walk = True  # one request walks with `_walk_one` (False: the general walk)

    @classmethod
    def load_model(cls, target, drafter=None, dtype: torch.dtype | None = None) -> DFlashModel:
        """This method's drafter for `target`: a directory, a loaded model, or the shipped one."""
        drafter = drafter or shipped_drafter(cls.name, target)
        if not drafter:
            raise DraftsmithError(
                f"method {cls.name!r} needs --drafter DIR (a trained drafter; draftsmith ships one only "
                "for the default target): train one with `draftsmith train`"
            )
        model = drafter if isinstance(drafter, DFlashModel) else load_drafter(drafter, target, dtype)
        if (model.cfg.markov_rank > 0) != (cls.name == "dspark"):
            kind = "DSpark" if model.cfg.markov_rank else "DFlash"
            raise DraftsmithError(f"{drafter} is a {kind} drafter; use --method {kind.lower()}")
        return model

    @classmethod
    def build(cls, target, options: DFlashDecodeOptions | None = None, k: int | None = None) -> DFlashDrafter:
        """STS temperatures and biases stored with the drafter (`sts.json`) scale its confidences; k is
        not used (a draft is at most the drafter's block)."""
        o = options or DFlashDecodeOptions()
        drafter = o.drafter
        path = drafter or shipped_drafter(cls.name, target)
        model = decoding_view(cls.load_model(target, path), o.lookup, o.draft_vocab)
        model = for_decoding(model, drafter)  # the shipped one is looked up once
        if model is not drafter:  # loaded here to draft, so nothing will train it
            model.fuse_for_decoding()
        sts = read_sts(path)
        return cls(model, target.runner.vocab_size, o.confidence_threshold, *sts, length_rule=o.length_rule)

    def start(self, prompt: torch.Tensor, hidden, max_len: int) -> None:
        cfg, p = self.cfg, self.model.fc.weight
        shape = (1, cfg.num_kv_heads, max_len + 1, cfg.head_dim)
        self.ctx_k = [torch.empty(shape, dtype=p.dtype, device=p.device) for _ in self.model.layers]
        self.ctx_v = [torch.empty(shape, dtype=p.dtype, device=p.device) for _ in self.model.layers]
        self.last_ctx = torch.zeros(1, 1, cfg.hidden_size, dtype=p.dtype, device=p.device)  # no context yet
        self.n_ctx = 0
        # the prompt's states wait like any other until the request drafts: one that never drafts
        # (the scheduler declined) never pays for feeding its drafter
        self.pending = [hidden] if hidden else []
        self.pending_bytes = state_bytes(hidden) if hidden else 0

    def _append(self, hidden) -> None:
        if hidden:
            self._append_all([self], [hidden])

    @staticmethod
    def _append_all(drafters, hiddens) -> None:
        """Fuse and project the new target states of several requests in one pass (rows side by
        side, each at its own positions), then write each request's rows into its own cache."""
        first = drafters[0]
        m = first.model
        feats = torch.cat([torch.cat([h[layer] for layer in first.cfg.target_layers], -1) for h in hiddens])
        feats = feats[None].to(m.fc.weight.dtype)
        sizes = [int(h[first.cfg.target_layers[0]].shape[0]) for h in hiddens]
        pos = torch.cat([torch.arange(d.n_ctx, d.n_ctx + n) for d, n in zip(drafters, sizes, strict=True)])
        pos = pos.to(feats.device)[None]
        ctx = m.fuse_context(feats)
        ends = torch.tensor(sizes).cumsum(0).tolist()
        for d, end in zip(drafters, ends, strict=True):
            d.last_ctx = ctx[:, end - 1 : end]
        for i, layer in enumerate(m.layers):
            k, v = layer.project_context(ctx, pos)
            for d, n, end in zip(drafters, sizes, ends, strict=True):
                d.ctx_k[i][:, :, d.n_ctx : d.n_ctx + n] = k[:, :, end - n : end]
                d.ctx_v[i][:, :, d.n_ctx : d.n_ctx + n] = v[:, :, end - n : end]
        for d, n in zip(drafters, sizes, strict=True):
            d.n_ctx += n

    def accept(self, tokens: torch.Tensor, n_new: int, hidden) -> None:
        self.accept_batch([self], [tokens], [n_new], [hidden])

    @classmethod
    def accept_batch(cls, drafters, tokens, n_new, hidden) -> None:
        """Queue the new states; they are projected when the request next drafts (`flush`)."""
        for d, h in zip(drafters, hidden, strict=True):
            if h:
                d.pending.append(h)
                d.pending_bytes += state_bytes(h)
        cls.flush([d for d in drafters if d.pending_bytes >= base.QUEUE_BYTES])

    @classmethod
    def flush(cls, drafters) -> None:
        """Project every queued state of these requests into their context caches, in one pass."""
        drafters = [d for d in drafters if d.pending]
        if not drafters:
            return
        hiddens = [merge_states(d.pending) for d in drafters]
        for d in drafters:
            d.pending, d.pending_bytes = [], 0
        cls._append_all(drafters, hiddens)

    def propose(self, tokens: torch.Tensor, k: int, params: SamplingParams, generator) -> Draft:
        return self.propose_batch([self], [tokens], [k], [params], [generator])[0]

    def batch_key(self) -> object | None:
        return (type(self), id(self.model), self.threshold, self.temperatures, self.biases)

    @classmethod
    @torch.inference_mode()
    def propose_batch(cls, drafters, tokens, ks, params, generators) -> list[Draft]:
        """One block pass for all requests (each attends over its own context), then the Markov
        walk slot by slot for all of them at once; each request keeps its own k, sampling
        parameters, generator, confidences and early stop."""
        cls.flush(drafters)
        first = drafters[0]
        m, cfg, dev = first.model, first.cfg, tokens[0].device
        n, b, s0 = len(drafters), cfg.block_size, first.first_slot
        anchors = [int(t.shape[0]) - 1 for t in tokens]
        for d, a in zip(drafters, anchors, strict=True):
            if d.n_ctx != a:
                raise RuntimeError(f"context cache out of sync: {d.n_ctx} states for anchor at {a}")
        ks = [min(k, b - s0) for k in ks]
        depth = max(ks)
        last = torch.stack([t[-1] for t in tokens])
        ids = torch.full((n, b), cfg.mask_token_id, dtype=torch.long, device=dev)
        ids[:, 0] = last
        pos = torch.tensor(anchors, device=dev)[:, None] + torch.arange(b, device=dev)[None]
        span = max(anchors)
        mask = None  # one request, or contexts of one length: every slot sees all of [context; block]
        if min(anchors) < span:
            mask = torch.ones(n, b, span + b, dtype=torch.bool, device=dev)
            for i, a in enumerate(anchors):
                mask[i, :, a:span] = False  # padding after a shorter context
        anchor_ctx = None
        if cfg.anchor_context:
            anchor_ctx = torch.cat([d.last_ctx for d in drafters]).expand(n, b, -1)
        guesses = None
        if cfg.lookup_input:  # each slot's prompt-lookup guess, from the context through the anchor
            found = [slot_guesses(t.cpu().numpy(), b, cfg.lookup_input) for t in tokens]
            guesses = tuple(torch.from_numpy(np.stack(g)).to(dev) for g in zip(*found, strict=True))
        states = m.backbone(ids, pos, cls._context(drafters, span), mask, anchor_ctx, guesses)
        states = states[:, s0 : s0 + depth]
        serial = bool(cfg.markov_state)  # the previous token updates each slot's state: one head read a slot
        lean = n == 1 and first.lean_walk and depth and not serial
        if lean and (params[0].greedy or first.threshold <= 0):  # a sampled stop would draw less
            return [first._walk_one(states[0], tokens[0], params[0], generators[0])]
        base = None if serial else m.base_logits(states).float()  # [n, depth, Vd]
        conf = None
        chosen: list[list[torch.Tensor]] = [[] for _ in drafters]
        hinted: list[list[int]] = [[] for _ in drafters]  # target ids drafted so far, for slot hints
        dists: list[list[torch.Tensor]] = [[] for _ in drafters]
        survive = [1.0] * n
        live = [k > 0 for k in ks]
        for d in drafters:
            d.confidences, d.confidence_logits, d.token_probs = [], [], []
        prev, prev_ids = m.prev_index(last), last
        for s in range(depth):
            rows = m.markov_in(prev) if cfg.markov_rank else None  # looked up once for both heads
            slot_states = m.step_states(states[:, s], prev_ids) if serial else states[:, s]
            slot_base = m.base_logits(slot_states).float() if serial else base[:, s]
            logits = slot_base + m.markov_bias(prev, rows).float() if cfg.markov_rank else slot_base
            for i, d in enumerate(drafters):  # a caller's per-slot hint (the hybrid's lookup), if any
                if d.slot_hint is not None and live[i] and s < ks[i]:
                    if s:
                        hinted[i].append(int(m.d2t[chosen[i][-1]]))
                    if (hint := d._hint_row(tokens[i], hinted[i])) is not None:
                        logits[i, hint[0]] += hint[1]
            if cfg.confidence:
                conf = m.confidence_logit(slot_states, prev, rows).float().tolist()
            picks = logits.argmax(-1)  # sampled rows overwrite theirs
            for i, d in enumerate(drafters):
                live[i] = live[i] and s < ks[i]
                if not live[i]:
                    continue
                if conf is not None:
                    survive[i] = d._note_confidence(s, conf[i], survive[i])
                    if s > 0 and survive[i] < d.threshold:
                        live[i] = False
                        continue
                q = None
                if not params[i].greedy:
                    picks[i], q = draft_choice(logits[i], params[i], generators[i])
                    dists[i].append(q)
                if d.length_rule == "prob":  # only its reader pays for it (the hot path otherwise)
                    q = torch.softmax(logits[i], -1) if q is None else q
                    d.token_probs.append(float(q[picks[i]]))
                chosen[i].append(picks[i])
            if not any(live):
                break
            prev, prev_ids = m.draft_row(picks), m.d2t[picks] if serial else None
        drafts = []
        for i in range(n):
            out = m.d2t[torch.stack(chosen[i])] if chosen[i] else torch.empty(0, dtype=torch.long, device=dev)
            drafts.append(Draft(out, first._target_probs(dists[i])))
        return drafts

    def _walk_one(
        self, states: torch.Tensor, tokens: torch.Tensor, params: SamplingParams, generator
    ) -> Draft:
        """One request's walk through its block states [depth, H] (its context `tokens` ending at
        the anchor) in the fewest ops: only the Markov bias, a caller's slot hint (the hybrid's
        lookup) and the sampling are serial (each needs the previous slot's pick); the
        confidences and the length rule's probabilities are read for all slots at once after the
        walk. The tokens, confidences, probabilities and random draws are the general walk's
        (tests/test_dflash_lean_decoding.py); a confidence stop drops the slots after it, as the
        general walk never drafts them (so a sampled walk takes this path only without a stop)."""
        m, cfg = self.model, self.cfg
        logits = m.base_logits(states).float()  # [depth, Vd]
        rows, dists = None, []
        if cfg.markov_rank or not params.greedy or self.slot_hint is not None:
            walked, picked, looked, hinted = [], [], [], []
            prev = m.prev_index(tokens[-1:])
            for s in range(states.shape[0]):
                slot = logits[s : s + 1]
                if cfg.markov_rank:
                    looked.append(m.markov_in(prev))
                    slot = slot + m.markov_bias(prev, looked[-1]).float()
                if self.slot_hint is not None:
                    if s:
                        hinted.append(int(m.d2t[picked[-1]]))
                    if (hint := self._hint_row(tokens, hinted)) is not None:
                        slot = slot.clone()
                        slot[0, hint[0]] += hint[1]
                if params.greedy:
                    pick = slot.argmax(-1)
                else:
                    pick, q = draft_choice(slot[0], params, generator)
                    pick = pick.reshape(1)
                    dists.append(q)
                walked.append(slot)
                picked.append(pick)
                prev = m.draft_row(pick)
            logits, picks = torch.cat(walked), torch.cat(picked)
            rows = torch.cat(looked) if looked else None
        else:
            picks = logits.argmax(-1)
        conf = m.confidence_logit(states, None, rows).float().tolist() if cfg.confidence else None
        probs = None
        if self.length_rule == "prob":
            q = torch.stack(dists) if dists else torch.softmax(logits, -1)
            probs = q.gather(-1, picks[:, None]).squeeze(-1).tolist()
        self.confidences, self.confidence_logits, self.token_probs = [], [], []
        survive, keep = 1.0, int(picks.shape[0])
        for s in range(keep):
            if conf is not None:
                survive = self._note_confidence(s, conf[s], survive)
                if s > 0 and survive < self.threshold:
                    keep = s
                    break
            if probs is not None:
                self.token_probs.append(probs[s])
        return Draft(m.d2t[picks[:keep]], self._target_probs(dists[:keep]))

    def _hint_row(self, tokens: torch.Tensor, drafted: list[int]) -> tuple[int, float] | None:
        """The caller's slot hint as (draft-vocabulary row, logit bonus), or None: none given, or a
        token outside the draft vocabulary (row Vd), which cannot be drafted."""
        hint = self.slot_hint(tokens, drafted)
        if hint is None or (row := int(self.model.t2d[hint[0]])) >= self.model.d2t.shape[0]:
            return None
        return row, hint[1]

    def _note_confidence(self, slot: int, logit: float, survive: float) -> float:
        """Record a slot's raw and STS-scaled confidence; the prefix survival after it."""
        c = sts_confidence(logit, slot, self.temperatures, self.biases)
        self.confidence_logits.append(logit)
        self.confidences.append(c)
        return survive * c

    def _target_probs(self, dists: list[torch.Tensor]) -> torch.Tensor | None:
        """Sampled slots' draft-vocabulary distributions over the target vocabulary (None: greedy)."""
        if not dists:
            return None
        probs = torch.zeros(len(dists), self.target_vocab, device=dists[0].device)
        probs[:, self.model.d2t] = torch.stack(dists)
        return probs

    @staticmethod
    def _context(drafters, span: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per draft layer, the requests' context keys/values as [n, kv_heads, span, d] (a view for
        one request; padded copies for several, masked out where a context is shorter)."""
        if len(drafters) == 1:
            d = drafters[0]
            return [(ck[:, :, :span], cv[:, :, :span]) for ck, cv in zip(d.ctx_k, d.ctx_v, strict=True)]
        kv = []
        for layer in range(len(drafters[0].ctx_k)):
            pair = []
            for cache in ("ctx_k", "ctx_v"):
                one = getattr(drafters[0], cache)[layer]
                out = one.new_zeros(len(drafters), one.shape[1], span, one.shape[3])
                for i, d in enumerate(drafters):
                    out[i, :, : d.n_ctx] = getattr(d, cache)[layer][0, :, : d.n_ctx]
                pair.append(out)
            kv.append(tuple(pair))
        return kv
