"""Batched speculative decoding: many requests, each with its own drafter, share every verify step.

A round is the single-request round (decode.py) done for all active slots at once: each request's
drafter proposes (its own state; forks of one drafter that can draft together, DFlash and DSpark,
run one forward for all their requests: `Drafter.propose_batch`), the scheduler picks how many draft
tokens the step verifies (draft_length.py), one slot-runner forward scores [last token + draft] for
every slot, and each request verifies, commits (`Progress.commit`, the same stop rules) and rolls
its slot back to what it accepted. A request's greedy output equals its single-request decoding:
verification only ever compares with the target's own argmax at each position, and a slot's rows
see only its own cache (tests/test_batch_decode.py checks this whatever else shares the batch).

Requests join (`add`: prefill into a free slot) and leave (`remove`) between steps: continuous
batching.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from draftsmith.engine.decode import record_confidences
from draftsmith.engine.draft_length import (
    AcceptanceHistory,
    StepCost,
    best_depth,
    check_schedule,
    history_length,
    survival_from_confidence,
    survival_from_history,
)
from draftsmith.engine.drafter import Draft, Drafter
from draftsmith.engine.lean_llama import LeanLlamaRunner
from draftsmith.engine.runner import now
from draftsmith.engine.sampling import SamplingParams
from draftsmith.engine.slots import SlotRunner
from draftsmith.engine.stats import GenerationStats
from draftsmith.engine.stop import Progress, StopRule
from draftsmith.engine.verify import verify
from draftsmith.errors import DraftsmithError


@dataclass
class Running:
    """One request in a slot: its drafter (a per-request fork), committed tokens and bookkeeping."""

    slot: int
    drafter: Drafter
    tokens: torch.Tensor  # every committed token; the last one is not in the slot's cache yet
    progress: Progress
    params: SamplingParams
    k: int
    rng: torch.Generator | None
    on_tokens: Callable[[list[int]], None] | None = None
    stats: GenerationStats = field(default_factory=GenerationStats)
    started: float = 0.0
    error: Exception | None = None  # its drafter or callback failed: it ended alone ("error")
    drafted_last: bool = False  # its last step drafted (its drafter has no backlog of states to feed)
    # this request's own acceptance by position: how deep its drafts are worth sizing (acceptance
    # differs a lot between prompts, code against chat, which the method's pooled history averages)
    own: AcceptanceHistory = field(default_factory=AcceptanceHistory)
    # drafts it kept per step it drafted in (running mean; of an explore step's full draft, what the
    # schedule would have kept): what a drafting step yields once the schedule cuts the draft where
    # confidence drops, which the position-by-position history (fed by full drafts too) underrates
    kept: float | None = None

    def fail(self, error: Exception) -> None:
        self.error = error
        self.progress.finish = "error"

    @property
    def finished(self) -> bool:
        return self.progress.finish is not None


EXPLORE_DEPTH = 3  # drafts per exploring request while drafting does not pay
EXPLORE_EVERY = 8  # steps between full drafts while drafting pays
# ...while it does not: from 32 steps, doubling each time the gate still declines at the same
# load, to 256. An explore step is a ragged step the gate did not want; at 16 users exploring every
# 32 steps cost ~2% (docs/experiments.md), and a long refusal at one load is evidence
DECLINED_EVERY = (32, 256)
# a drafting step must be forecast this much faster than a plain one: the forecast is built from
# running means and a table, and at 8 users a forecast gain inside this band measured 0.90-1.12x
DRAFT_MARGIN = 0.05
# how far one step may move the gate's forecast correction (real step time / forecast): at 4 users
# drafting steps ran 1.12x their forecast and plain steps 0.94x
FORECAST_ERROR_BOUND = 1.25


def group_key(run: Running) -> object:
    """Requests whose drafters share a `batch_key` draft (and accept) in one call; others alone."""
    try:
        key = run.drafter.batch_key()
        hash(key)
    except Exception:
        key = None
    return ("slot", run.slot) if key is None else ("drafter", key)


def isolated(call: Callable[[list], object], group: list) -> object:
    """call(group) for requests that share one drafter call; if it fails, each request alone, so
    a failure ends only its own request (its run fails, the result is None)."""
    try:
        return call(group)
    except Exception as e:
        if len(group) == 1:
            group[0][0].fail(e)
            return None
    results = [isolated(call, [one]) for one in group]
    if all(r is None for r in results):
        return None
    merged: dict = {}
    for r in results:
        merged.update(r or {})
    return merged


class DraftTime:
    """Seconds one drafting call takes for n units of work of one method, from recent calls.

    A unit is one request's draft position plus one (sum of k + 1 over the call's requests):
    drafters that draft a group in one forward (DFlash, DSpark) cost far less than n single
    calls, and their serial walk grows with k, so this fits a line a + c * n (least squares,
    both terms >= 0) over recent calls; while only one size was seen, time scales with n."""

    def __init__(self, window: int = 32) -> None:
        self.calls: deque[tuple[int, float]] = deque(maxlen=window)

    def observe(self, n: int, seconds: float) -> None:
        self.calls.append((n, seconds))

    def __call__(self, n: int) -> float:
        if not self.calls:
            return 0.0
        sizes = [size for size, _ in self.calls]
        times = [t for _, t in self.calls]
        mean_n, mean_t = sum(sizes) / len(sizes), sum(times) / len(times)
        spread = sum((size - mean_n) ** 2 for size in sizes)
        if spread == 0:
            return mean_t * n / mean_n
        slope = max(sum((size - mean_n) * (t - mean_t) for size, t in self.calls) / spread, 0.0)
        base = mean_t - slope * mean_n
        if base < 0:  # through the origin instead
            return n * sum(size * t for size, t in self.calls) / sum(size * size for size in sizes)
        return base + slope * n


class BatchDecoder:
    """Up to `slots` concurrent requests over one `SlotRunner` (capacity tokens per request).

    schedule: "fixed" verifies each request's k drafts; "history" and "confidence" pick the step's
    depth from the cost table `cost(slots, rows)` and each request's survival estimate (running
    acceptance, or the confidence head where the drafter has one, else its history).
    """

    def __init__(
        self,
        runner: LeanLlamaRunner,
        slots: int,
        capacity: int,
        schedule: str = "history",
        cost: StepCost | None = None,
        margin: float = DRAFT_MARGIN,
    ) -> None:
        if runner.fixed_rows:
            raise DraftsmithError(
                "batched decoding runs in float32 on this CPU: in bf16/fp16 a token's logits depend on "
                "the step's shape, so outputs would drift from single-request decoding; load the "
                "target with --dtype float32 (or serve with --max-batch 1)"
            )
        self.runner = SlotRunner(runner, slots, min(capacity, runner.max_context))
        self.capacity = self.runner.capacity
        self.schedule = check_schedule(schedule)
        self.cost = cost
        if margin < 0:
            raise DraftsmithError(f"the drafting margin must be >= 0, got {margin}")
        self.margin = margin
        self.running: dict[int, Running] = {}
        self.histories: dict[str, AcceptanceHistory] = {}  # per method, pooled over its requests
        self.draft_time: dict[str, DraftTime] = {}  # per method: seconds per drafting call
        # calls that first feed a backlog of states (a request that did not draft last step); a gate
        # that rarely drafts sees only these, and pricing them as steady calls priced them at 0
        self.catchup_time: dict[str, DraftTime] = {}
        self.kept: dict[str, float] = {}  # per method: drafts kept per drafting step (`Running.kept`)
        # measured forward time / the table's, running mean, for drafting and for plain steps apart
        # and per load (slots, to a power of two): the machine drifts as a whole, the table can be
        # off in how much more a multi-row step costs than a one-row step (measured on another day
        # or code path), and by how much depends on the batch; keyed (drafted?, load)
        self.cost_scale: dict[tuple[bool, int], float] = {}
        self.overhead: dict[tuple[bool, int], float] = {}  # step time besides drafting and forward, per slot
        # whole step time / the gate's forecast of it, running mean, per decision (drafting or not)
        # and load: what the forecast's parts miss (a drafting spell's first step feeds the
        # drafters their backlog, slow steps pull means, verify depth differs from the forecast's)
        self.forecast_error: dict[tuple[bool, int], float] = {}
        self._forecast: tuple[bool, int, float] | None = None  # (drafting?, slots, seconds) of this step
        self._proposing_s = 0.0
        self.steps = 0
        self._explore_at = 1
        self._explored = 0  # requests that explored so far (the turn order)
        self._drafting = True
        self._declines = 0  # explore steps in a row while the gate declined, at load _declined_at
        self._declined_at = 0

    @property
    def free_slots(self) -> int:
        return self.runner.slots - len(self.running)

    @torch.inference_mode()
    def add(
        self,
        prompt: list[int],
        drafter: Drafter,
        stop: StopRule,
        params: SamplingParams | None = None,
        k: int | None = None,
        on_tokens: Callable[[list[int]], None] | None = None,
    ) -> Running:
        """Prefill `prompt` into the lowest free slot (keeps the active range compact)."""
        params = params or SamplingParams()
        k = drafter.default_k if k is None else k
        if k < 0:
            raise DraftsmithError(f"draft length must be >= 0, got {k}")
        if not prompt:
            raise DraftsmithError("the prompt is empty")
        if len(prompt) >= self.capacity:
            raise DraftsmithError(
                f"the prompt has {len(prompt)} tokens but a slot holds {self.capacity} "
                "(prompt and completion)"
            )
        if not self.free_slots:
            raise DraftsmithError("no free slot")
        slot = min(set(range(self.runner.slots)) - set(self.running))
        dev = self.runner.device
        ids = torch.tensor(prompt, dtype=torch.long, device=dev)
        t0 = now(dev)
        self.runner.reset(slot)
        hidden = {}
        if len(prompt) > 1:
            hidden = self.runner.forward([(slot, ids[:-1])], drafter.hidden_layers, n_logits=0)[0].hidden
        drafter.start(ids, hidden, min(self.capacity, len(prompt) + stop.max_new_tokens + k))
        run = Running(
            slot,
            drafter,
            ids,
            Progress(stop),
            params,
            k,
            None if params.greedy else params.generator(dev),
            on_tokens,
            started=t0,
        )
        run.stats.prefill_s = now(dev) - t0
        self.running[slot] = run
        return run

    def remove(self, slot: int) -> Running | None:
        """Free a slot (finished, or its client went away); its cache rows are simply reused."""
        return self.running.pop(slot, None)

    def history(self, run: Running) -> AcceptanceHistory:
        return self.histories.setdefault(run.drafter.name, AcceptanceHistory())

    def _survival(self, run: Running, n: int) -> list[float]:
        confidences = getattr(run.drafter, "confidences", None)
        if self.schedule == "confidence" and confidences:
            return survival_from_confidence(confidences[:n])
        return survival_from_history(self.history(run), n)

    @torch.inference_mode()
    def step(self) -> list[Running]:
        """One round for every running request; returns those that finished in it (still in their
        slots until `remove`). Times the whole step, so the drafting gate also sees what the
        table does not hold (verifying, committing, feeding drafters), per slot, drafting or not."""
        t0 = now(self.runner.device)
        self._forecast = None
        done, timing = self._step()
        seconds = now(self.runner.device) - t0
        if timing is not None:
            drafted, b, measured = timing
            per_slot = max(seconds - measured, 0.0) / b
            _running_mean(self.overhead, (drafted, load(b)), per_slot)
        if self._forecast is not None and timing is not None:
            drafting, slots, forecast = self._forecast
            # bounded: a spell of the VM stalling must not teach the gate that a kind of step is slow
            ratio = min(max(seconds / forecast, 1 / FORECAST_ERROR_BOUND), FORECAST_ERROR_BOUND)
            # from a prior of 1: the first drafting step runs before any drafting time is known, so
            # its forecast lacks that part, and taking its ratio whole kept a fresh server from
            # drafting at one user for 130 steps where drafting made 1.27x
            _running_mean(self.forecast_error, (drafting, load(slots)), ratio, prior=1.0)
        return done

    def _step(self) -> tuple[list[Running], tuple[bool, int, float] | None]:
        """The round; also (drafted?, slots, seconds of drafting + forward) when a forward ran."""
        dev = self.runner.device
        runs = list(self.running.values())
        self.steps += 1
        # every few steps draft in full, whatever pays, so the acceptance history and drafting-time
        # estimates stay current (often while drafting pays, rarely while it does not)
        explore = self.steps >= self._explore_at
        explorers: set[int] = set()
        if explore:
            # the kind of step the gate is not taking learns nothing meanwhile: let its correction
            # fade, so a verdict learnt in a bad spell is tried again, and relearnt if it still holds
            stale = (not self._drafting, load(len(runs)))
            if stale in self.forecast_error:
                self.forecast_error[stale] = 1 + (self.forecast_error[stale] - 1) / 2
            self._explore_at = self.steps + self._explore_interval(len(runs))
            # while drafting pays every request drafts anyway; while it does not, a couple of
            # requests (in turn) draft in full, which keeps the estimates current at a small cost
            if self.schedule != "fixed" and not self._drafting:  # a short draft: a cheaper step
                turn = [runs[(self._explored + i) % len(runs)].slot for i in range(min(2, len(runs)))]
                explorers = set(turn)
                self._explored += len(turn)
        elif self.schedule != "fixed":
            # one request shares its step with nobody: its own sizing (as `generate` sizes drafts)
            # is the whole decision. The gate's forecast errs by 5-10% where drafting gains 10-30%
            # at one user, and declining there cost DSpark 1.15-1.28x -> ~1.0x plain
            self._drafting = len(runs) == 1 or self._drafting_pays(runs)
            if self._drafting:
                self._declines = 0
        t0 = now(dev)
        drafts: dict[int, Draft] = {}
        groups: dict[object, list[tuple[Running, int]]] = {}
        for run in runs:
            room = run.progress.room(int(run.tokens.shape[0]), self.capacity)
            if room <= 0:
                continue
            drafting = self._drafting or run.slot in explorers or (explore and not explorers)
            k = min(run.k, room - 1) if drafting else 0
            if run.slot in explorers:
                k = min(k, EXPLORE_DEPTH)
            if self.schedule != "fixed" and k and not explore:  # sized on its own history: no waste
                k = self._sized(run, k)
            if not k:
                drafts[run.slot] = Draft.empty(dev)
                continue
            groups.setdefault(group_key(run), []).append((run, k))
        self._proposing_s = 0.0
        for group in groups.values():
            drafts.update(isolated(self._propose, group) or {})
        drafting_slots = {run.slot for group in groups.values() for run, _ in group}
        for run in runs:
            run.drafted_last = run.slot in drafting_slots
        live = [run for run in runs if run.slot in drafts]
        if not live:
            return self._ended(runs), None
        depth = max(len(d.tokens) for d in drafts.values())
        would: dict[int, int] = {}  # per drafting request: how deep a scheduled step would verify
        if self.schedule != "fixed" and depth:
            survivals = [self._survival(run, len(drafts[run.slot].tokens)) for run in live]
            if explore:  # a full draft: what the schedule would have kept of it, request by request
                would = {
                    run.slot: best_depth([s], self._uniform_cost, len(s))
                    for run, s in zip(live, survivals, strict=True)
                    if run.slot in drafting_slots
                }
            else:
                depth = best_depth(survivals, self.cost, depth)
        work = []
        for run in live:
            d = drafts[run.slot]
            d.tokens, d.probs = d.tokens[:depth].to(dev), None if d.probs is None else d.probs[:depth]
            work.append((run.slot, torch.cat([run.tokens[-1:], d.tokens])))
        t1 = now(dev)
        hidden = tuple(dict.fromkeys(key for run in live for key in run.drafter.hidden_layers))
        outs = self.runner.forward(work, hidden)
        t2 = now(dev)
        timing = (depth > 0, len(work), self._proposing_s + t2 - t1)
        if self.cost is not None:  # how fast this kind of step runs now against the table
            ratio = (t2 - t1) / ragged_cost(self.cost, [len(ids) for _, ids in work])
            _running_mean(self.cost_scale, (depth > 0, load(len(work))), ratio)
        accepts: dict[object, list[tuple[Running, int, dict]]] = {}
        for run, out in zip(live, outs, strict=True):
            d = drafts[run.slot]
            n_ctx = int(run.tokens.shape[0])
            n_acc, bonus = verify(out.logits, d.tokens, d.probs, run.params, run.rng)
            self.runner.rollback(run.slot, n_ctx + n_acc)
            run.stats.draft_s += (t1 - t0) / len(live)
            run.stats.verify_s += (t2 - t1) / len(live)
            emitted, produced = run.progress.commit(d.tokens[:n_acc].tolist() + [bonus])
            run.stats.record_round(len(d.tokens), n_acc, produced)
            record_confidences(run.stats, run.drafter, len(d.tokens), n_acc)
            self.history(run).update(len(d.tokens), n_acc)
            run.own.update(len(d.tokens), n_acc)
            if self.schedule != "fixed" and run.slot in drafting_slots:
                self._observe_kept(run, min(n_acc, would.get(run.slot, n_acc)), len(d.tokens))
            try:
                if run.on_tokens and emitted:
                    run.on_tokens(emitted)
            except Exception as e:
                run.fail(e)
            if run.finished:
                continue
            run.tokens = torch.cat([run.tokens, torch.tensor(emitted, dtype=torch.long, device=dev)])
            keep = {key: out.hidden[key][: n_acc + 1] for key in run.drafter.hidden_layers}
            accepts.setdefault(group_key(run), []).append((run, n_acc + 1, keep))
        for group in accepts.values():
            isolated(self._accept, group)
        for run in runs:
            if not run.finished:
                run.progress.room(int(run.tokens.shape[0]), self.capacity)  # ends it at the budget
        return self._ended(runs), timing

    @staticmethod
    def _accept(group: list[tuple[Running, int, dict]]) -> None:
        """Hand the kept target states to drafters that share weights in one call."""
        runs = [run for run, _, _ in group]
        type(runs[0].drafter).accept_batch(
            [run.drafter for run in runs],
            [run.tokens for run in runs],
            [n for _, n, _ in group],
            [keep for _, _, keep in group],
        )

    def _ended(self, runs: list[Running]) -> list[Running]:
        done = [run for run in runs if run.finished]
        for run in done:
            run.stats.new_tokens = len(run.progress.new)
            run.stats.total_s = now(self.runner.device) - run.started
        return done

    def _propose(self, group: list[tuple[Running, int]]) -> dict[int, Draft]:
        """Draft for requests that share a drafter's weights in one call, timing it per method."""
        runs = [run for run, _ in group]
        t0 = now(self.runner.device)
        drafts = type(runs[0].drafter).propose_batch(
            [run.drafter for run in runs],
            [run.tokens for run in runs],
            [k for _, k in group],
            [run.params for run in runs],
            [run.rng for run in runs],
        )
        seconds = now(self.runner.device) - t0
        self._proposing_s += seconds
        units = sum(k + 1 for _, k in group)
        # a call that first feeds the states queued while a request did not draft (the prompt's,
        # the plain steps') costs more than drafting does while it goes on: it is timed apart, so
        # steady drafting is not priced by its catch-up, nor a catch-up (what a gate that rarely
        # drafts always pays) by steady drafting (8 users: priced at 0, never observed)
        steady = all(run.drafted_last for run in runs)
        timers = self.draft_time if steady else self.catchup_time
        timers.setdefault(runs[0].drafter.name, DraftTime()).observe(units, seconds)
        return {run.slot: draft for run, draft in zip(runs, drafts, strict=True)}

    def _explore_interval(self, b: int) -> int:
        """Steps until the next explore step: EXPLORE_EVERY while drafting pays; while it does not,
        DECLINED_EVERY's first value, doubled on each explore the gate keeps declining after, back
        to the first when the load (slots, to a power of two) changes or drafting resumes."""
        if self._drafting:
            self._declines = 0
            return EXPLORE_EVERY
        if load(b) != self._declined_at:
            self._declines, self._declined_at = 0, load(b)
        first, last = DECLINED_EVERY
        interval = min(first << min(self._declines, 16), last)
        self._declines += 1
        return interval

    def _drafting_pays(self, runs: list[Running]) -> bool:
        """Before drafting: is a speculative step worth its drafting time? Drafting grows with the
        batch while the verify step is shared, so at some concurrency plain steps win; this
        compares expected tokens per second both ways (`drafting_estimate`) and drafts only when
        drafting is forecast `margin` faster."""
        estimate = self.drafting_estimate(runs)
        if estimate is None:
            return any(run.k for run in runs)
        expected, drafting_s, plain_tokens, plain_s, depth = estimate
        # the margin guards starting to draft, not going on: a spell that keeps drafting while its
        # forecast gain sits inside the margin would otherwise flap (each resumption first feeds the
        # drafters their backlog); at one user the gate stopped at a forecast +4% where drafting
        # steps measured +11%
        margin = 0.0 if self._drafting else self.margin
        drafting = depth > 0 and expected / drafting_s > (1 + margin) * plain_tokens / plain_s
        b = len(runs)  # what the chosen kind of step was forecast to take, before the correction
        chosen = drafting_s / self._error(True, b) if drafting else plain_s / self._error(False, b)
        self._forecast = (drafting, b, chosen)
        return drafting

    def drafting_estimate(self, runs: list[Running]) -> tuple[float, float, int, float, int] | None:
        """(expected tokens, seconds) of a drafting step, (tokens, seconds) of a plain one, and the
        drafting step's depth: from each method's acceptance history, its measured drafting time,
        the measured time each kind of step spends outside drafting and the forward, and the
        step-cost table. None without a cost table or a request that drafts."""
        # each request drafts what its own history makes worth drafting (as `_step` sizes it), so
        # the forecast prices that, not the method's full k (pricing DSpark's k = 7
        # when it drafts ~3 doubled the forecast drafting time at one user)
        sized = {run.slot: self._sized(run, run.k) for run in runs if run.k}
        drafting = [run for run in runs if sized.get(run.slot)]
        if self.cost is None or not drafting:
            return None
        b = len(runs)
        survivals = [survival_from_history(self.history(run), sized[run.slot]) for run in drafting]
        depth = best_depth(survivals, self.cost, max(sized.values()))
        # tokens: what drafting steps have yielded (the request's own, else its method's), else the
        # history's forecast. One user: the history said 1.25-1.43 tokens a drafting
        # step, the steps made 1.54, and the gate declined where drafting ran 1.26x plain
        expected = float(b)
        for run, s in zip(drafting, survivals, strict=True):
            kept = run.kept if run.kept is not None else self.kept.get(run.drafter.name)
            expected += sum(s[:depth]) if kept is None else kept
        # drafting time is measured live, the table once: put the table on the live clock
        calls: dict[object, list[Running]] = {}
        for run in drafting:
            calls.setdefault(group_key(run), []).append(run)
        seconds = sum(self._draft_seconds(group, sized) for group in calls.values())
        drafting_s = seconds + b * self._overhead(True, b) + self.cost(b, depth + 1) * self._scale(True, b)
        plain_s = b * self._overhead(False, b) + self.cost(b, 1) * self._scale(False, b)
        return expected, drafting_s * self._error(True, b), b, plain_s * self._error(False, b), depth

    def _draft_seconds(self, group: list[Running], sized: dict[int, int]) -> float:
        """Forecast time of one drafting call: a catch-up call's measured time if a request in it
        did not draft last step, else a steady call's; the other kind's when one kind has no
        measurement yet, 0 before any."""
        name = group[0].drafter.name
        timers = [self.draft_time.get(name), self.catchup_time.get(name)]
        if not all(run.drafted_last for run in group):
            timers.reverse()
        timer = next((t for t in timers if t is not None and t.calls), None)
        return timer(sum(sized[run.slot] + 1 for run in group)) if timer is not None else 0.0

    def _error(self, drafting: bool, b: int) -> float:
        """How much longer than forecast this decision's steps ran at this load (else the nearest
        load's, else 1). Never the other decision's: a drafting step's misses are its own."""
        return nearest(self.forecast_error, drafting, load(b), 1.0, other_kind=False)

    def _overhead(self, drafted: bool, b: int) -> float:
        """Measured per-slot step time outside drafting and the forward, for drafting or plain
        steps at this load (see `nearest`), 0 before any."""
        return nearest(self.overhead, drafted, load(b), 0.0)

    def _scale(self, drafted: bool, b: int) -> float:
        """Live time / table time for drafting or plain steps at this load (see `nearest`), 1
        before any."""
        return nearest(self.cost_scale, drafted, load(b), 1.0)

    def _observe_kept(self, run: Running, kept: int, depth: int) -> None:
        """Fold one drafting step's kept drafts into the request's and its method's running means,
        each starting from the history's forecast for that depth: a first step that kept nothing
        must not read as "drafting never pays" (the gate would then never draft to learn better)."""
        name = run.drafter.name
        if name not in self.kept:  # the history's forecast only once, not on every drafting step
            self.kept[name] = sum(survival_from_history(self.history(run), depth))
        _running_mean(self.kept, name, kept)
        run.kept = 0.9 * (self.kept[name] if run.kept is None else run.kept) + 0.1 * kept

    def _sized(self, run: Running, k: int) -> int:
        """How many of its k drafts this request's own acceptance makes worth verifying."""
        return history_length(run.own, k, self._uniform_cost)

    def _uniform_cost(self, b: int, rows: int) -> float:
        """A one-request view of the step: as if every running request drafted like this one."""
        return self.cost(len(self.running), rows) if self.cost else 1.0


def batch_generate(
    decoder: BatchDecoder,
    prompts: list[list[int]],
    drafters: list[Drafter],
    stop: StopRule,
    params: SamplingParams | None = None,
    k: int | None = None,
) -> list[tuple[list[int], str, GenerationStats]]:
    """Decode every prompt to the end through `decoder`, admitting new ones as slots free up;
    results in input order. The library's batch entry point, and what the tests drive."""
    results: list = [None] * len(prompts)
    queue = list(range(len(prompts)))[::-1]
    index: dict[int, int] = {}
    while queue or decoder.running:
        while queue and decoder.free_slots:
            i = queue.pop()
            run = decoder.add(prompts[i], drafters[i], stop, params, k)
            index[run.slot] = i
        for run in decoder.step():
            if run.error is not None:
                raise run.error
            results[index.pop(run.slot)] = (run.progress.new, run.progress.finish, run.stats)
            decoder.remove(run.slot)
    return results


def load(slots: int) -> int:
    """The load bucket a step's measurements are kept under: its slots, to a power of two."""
    return 1 << max(slots - 1, 0).bit_length()


def nearest(
    means: dict[tuple[bool, int], float], drafted: bool, at: int, default: float, other_kind: bool = True
) -> float:
    """The measurement of this kind of step at this load; else the other kind's at this load (the
    current speed of the machine; skipped without `other_kind`), else this kind's at the nearest
    load measured, else default."""
    if (drafted, at) in means:
        return means[(drafted, at)]
    if other_kind and (not drafted, at) in means:
        return means[(not drafted, at)]
    mine = [(abs(a.bit_length() - at.bit_length()), a) for kind, a in means if kind == drafted]
    return means[(drafted, min(mine)[1])] if mine else default


def ragged_cost(cost: StepCost, rows: list[int]) -> float:
    """The table's time for a step whose slots run `rows` rows each. Only real rows are multiplied
    (slots.py), so between the one-row step and the step at the longest row, time grows with the
    share of extra rows actually present."""
    b, deepest = len(rows), max(rows)
    if deepest == 1:
        return cost(b, 1)
    share = sum(r - 1 for r in rows) / (b * (deepest - 1))
    return cost(b, 1) + share * (cost(b, deepest) - cost(b, 1))


def _running_mean(means: dict, key: object, value: float, prior: float | None = None) -> None:
    """Fold one live measurement into a slowly moving mean: steps are noisy, the trend is what counts.
    Without a prior the first measurement is taken whole; with one, the mean starts there."""
    old = means.get(key, prior)
    means[key] = value if old is None else 0.9 * old + 0.1 * value
