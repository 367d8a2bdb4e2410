"""Batched decoding on tiny models: the slot runner equals the single runner, every method's greedy
output in a batch equals its single-request plain decoding, schedules, and faults stay per request."""

from __future__ import annotations

import pytest
import torch
from conftest import VOCAB, tiny_model, tiny_target
from test_dflash import make_drafter
from test_eagle3 import make_model as make_eagle3
from test_engine import perturbed_copy
from test_mtp import make_mtp

from draftsmith.drafters.dflash.drafter import DFlashDecodeOptions, DFlashDrafter
from draftsmith.drafters.draft_model import DraftModelDrafter
from draftsmith.drafters.dspark.drafter import DSparkDrafter
from draftsmith.drafters.eagle3.drafter import Eagle3Drafter
from draftsmith.drafters.hybrid import HybridDrafter
from draftsmith.drafters.mtp.drafter import MTPDrafter
from draftsmith.drafters.ngram import NgramDrafter
from draftsmith.drafters.options import TrainedDecodeOptions
from draftsmith.drafters.plain import PlainDrafter
from draftsmith.engine import batch_decode
from draftsmith.engine.batch_cost import BatchCost, measure, monotone
from draftsmith.engine.batch_decode import (
    DECLINED_EVERY,
    EXPLORE_EVERY,
    FORECAST_ERROR_BOUND,
    BatchDecoder,
    DraftTime,
    batch_generate,
    load,
    nearest,
    ragged_cost,
)
from draftsmith.engine.decode import StopRule, speculative_generate
from draftsmith.engine.draft_length import (
    AcceptanceHistory,
    best_depth,
    survival_from_confidence,
    survival_from_history,
)
from draftsmith.engine.runner import FINAL
from draftsmith.engine.sampling import SamplingParams
from draftsmith.engine.slots import SlotRunner
from draftsmith.errors import DraftsmithError


def prompts(n: int = 5) -> list[list[int]]:
    g = torch.Generator().manual_seed(3)
    return [
        torch.randint(3, VOCAB, (int(ln),), generator=g).tolist()
        for ln in torch.randint(1, 20, (n,), generator=g)
    ]


def drafters(target) -> dict:
    model = target.model
    dspark = DSparkDrafter.build(target, DFlashDecodeOptions(drafter=make_drafter(target, dspark=True)))
    return {
        "plain": PlainDrafter(),
        "ngram": NgramDrafter(k=5, max_ngram=3),
        "draft-model": DraftModelDrafter(perturbed_copy(model, 0.05), VOCAB, k=4),
        "oracle": DraftModelDrafter(tiny_model(model.config.model_type, layers=4), VOCAB, k=5),
        "dflash": DFlashDrafter.build(
            target, DFlashDecodeOptions(drafter=make_drafter(target, dspark=False))
        ),
        "dspark": dspark,
        "hybrid": HybridDrafter(dspark),
        "eagle3": Eagle3Drafter(make_eagle3(target), VOCAB, k=3),
        "mtp": MTPDrafter.build(target, TrainedDecodeOptions(drafter=make_mtp(target))),
    }


@pytest.mark.parametrize("arch", ["llama", "qwen3"])
def test_slot_runner_equals_the_single_runner_per_slot(arch):
    target = tiny_target(arch)
    runner = target.runner
    seqs = prompts(3)
    slots = SlotRunner(runner, 4, 64)
    for s, ids in zip((0, 2, 3), seqs, strict=True):
        assert slots.forward([(s, torch.tensor(ids))], n_logits=0)[0].logits is None  # prefill only
    work = [(0, torch.tensor([5, 6, 7])), (3, torch.tensor([9]))]  # ragged; slot 2 idle in the range
    outs = slots.forward(work, hidden=(1, 3, FINAL))
    assert [o.logits.shape[0] for o in outs] == [3, 1]
    for (s, new), out in zip(work, outs, strict=True):
        ids = seqs[(0, 2, 3).index(s)] + new.tolist()
        runner.reset(64)
        ref = runner.forward(torch.tensor(ids), n_logits=len(new), hidden=(1, 3, FINAL))
        torch.testing.assert_close(out.logits, ref.logits, atol=1e-4, rtol=1e-4)  # one prefill vs chunks
        for key in (1, 3, FINAL):
            torch.testing.assert_close(out.hidden[key], ref.hidden[key][-len(new) :], atol=1e-4, rtol=1e-4)
    assert slots.lengths == [len(seqs[0]) + 3, 0, len(seqs[1]), len(seqs[2]) + 1]
    slots.rollback(0, 4)
    with pytest.raises(ValueError, match="cannot roll back"):
        slots.rollback(0, 5)


def test_a_ragged_step_multiplies_only_its_real_rows():
    """Slots with fewer rows than the longest, and idle slots inside the range, cost no matmul rows:
    an explore step (two requests drafting) must not make every slot in the batch pay its rows."""
    target = tiny_target("llama")
    seqs = prompts(3)
    slots = SlotRunner(target.runner, 4, 64)
    for s, ids in zip((0, 2, 3), seqs, strict=True):
        slots.forward([(s, torch.tensor(ids))], n_logits=0)
    layer = target.runner.layers[0]
    seen = []
    qkv = layer["qkv"]
    layer["qkv"] = lambda x, row_major: seen.append(x.reshape(-1, x.shape[-1]).shape[0]) or qkv(x, row_major)
    try:
        slots.forward([(0, torch.tensor([5, 6, 7, 8])), (3, torch.tensor([9]))])
        slots.forward([(0, torch.tensor([1])), (2, torch.tensor([2])), (3, torch.tensor([3]))])
    finally:
        layer["qkv"] = qkv
    assert seen == [5, 3]  # not 4 slots x 4 rows, nor 4 x 1 with the idle slot 1


def test_a_lone_slot_steps_as_it_would_in_a_batch():
    """One slot with work takes the single-request path (cache slices, no mask for one token); its
    logits, hidden states and cache must equal the padded batched path's for the same step."""
    target = tiny_target("llama")
    seqs = prompts(2)
    results = []
    for partner in (False, True):
        slots = SlotRunner(target.runner, 2, 64)
        for s, ids in enumerate(seqs):
            slots.forward([(s, torch.tensor(ids))], n_logits=0)
        got = []
        for new in ([5], [6, 7, 8], [9]):  # one-token and draft-sized steps
            work = [(0, torch.tensor(new))] + ([(1, torch.tensor([3, 4]))] if partner else [])
            out = slots.forward(work, hidden=(2, FINAL))[0]
            got.append((out.logits, out.hidden[2], out.hidden[FINAL]))
            if partner:
                slots.rollback(1, len(seqs[1]))
        n = slots.lengths[0]
        results.append((got, slots.k[:, 0, :, :n].clone(), slots.v[:, 0, :, :n].clone()))
    (alone, k_alone, v_alone), (batched, k_batched, v_batched) = results
    for a, b in zip(alone, batched, strict=True):
        for x, y in zip(a, b, strict=True):
            torch.testing.assert_close(x, y, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(k_alone, k_batched, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(v_alone, v_batched, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("arch", ["llama", "qwen3"])
@pytest.mark.parametrize("schedule", ["fixed", "history", "confidence"])
def test_batched_greedy_equals_single_request_plain_for_every_method(arch, schedule):
    target = tiny_target(arch)
    seqs = prompts(5)
    stop = StopRule(24, eos_ids=frozenset({2}))
    ref = [speculative_generate(target.runner, PlainDrafter(), p, stop).tokens for p in seqs]
    cost = lambda b, rows: 1.0 + 0.2 * b * rows  # noqa: E731 - steep enough that schedules cut drafts
    for name, base in drafters(target).items():
        decoder = BatchDecoder(target.runner, 3, 64, schedule, cost)  # 5 requests through 3 slots
        out = batch_generate(decoder, seqs, [base.fork() for _ in seqs], stop)
        assert [tokens for tokens, _, _ in out] == ref, (name, schedule)
        if name in ("oracle", "draft-model") and schedule == "fixed":
            assert sum(stats.accepted for _, _, stats in out) > 0, name
        assert not decoder.running and decoder.free_slots == 3


def test_mixed_methods_share_a_batch_and_stop_rules_match_single_decoding():
    target = tiny_target()
    ds = drafters(target)
    seqs = prompts(4)
    stop = StopRule(30, eos_ids=frozenset({2, 11}), stop_strings=("t7 t",), decode=target.decode)
    decoder = BatchDecoder(target.runner, 4, 64, "fixed")
    names = ["oracle", "ngram", "dspark", "draft-model"]
    out = batch_generate(decoder, seqs, [ds[n].fork() for n in names], stop)
    for (tokens, finish, _), p, n in zip(out, seqs, names, strict=True):
        single = speculative_generate(target.runner, ds[n].fork(), p, stop, adaptive=False)
        assert (tokens, finish) == (single.tokens, single.finish_reason), n


def test_sampled_requests_match_single_request_sampling_with_the_same_seed():
    target = tiny_target()
    base = DraftModelDrafter(perturbed_copy(target.model, 0.05), VOCAB, k=4)
    seqs = prompts(3)
    stop = StopRule(20)
    params = SamplingParams(temperature=0.8, top_p=0.9, seed=5)
    decoder = BatchDecoder(target.runner, 3, 64, "fixed")
    out = batch_generate(decoder, seqs, [base.fork() for _ in seqs], stop, params)
    for (tokens, _, _), p in zip(out, seqs, strict=True):
        single = speculative_generate(target.runner, base.fork(), p, stop, params, adaptive=False)
        assert tokens == single.tokens


def test_best_depth_follows_the_cost_table():
    sure = [[0.9, 0.81, 0.73, 0.66]]
    assert best_depth(sure, None, 4) == 4  # no table: rows are free
    assert best_depth(sure, lambda b, r: 1.0, 4) == 4
    assert best_depth(sure, lambda b, r: float(r), 4) == 0  # every row costs a full step: never pays
    steep_after_two = lambda b, r: 1.0 if r <= 3 else 3.0  # noqa: E731
    assert best_depth(sure, steep_after_two, 4) == 2
    weak = [[0.1, 0.01], [0.1, 0.01]]
    assert best_depth(weak, lambda b, r: 1.0 + 0.1 * (r - 1), 2) == 0  # 10% per row for 0.1 token
    assert survival_from_confidence([0.5, 0.5, 1.0]) == [0.5, 0.25, 0.25]
    h = AcceptanceHistory()
    h.update(2, 2)
    h.update(2, 0)
    assert survival_from_history(h, 2) == pytest.approx([2 / 4, 2 / 4 * 2 / 3])  # Beta(1, 1) prior


def test_batch_cost_interpolates_and_measures_the_real_shapes():
    cost = BatchCost({(1, 1): 1.0, (1, 4): 2.0, (4, 1): 2.0, (4, 4): 6.0})
    assert cost(1, 1) == 1.0 and cost(4, 4) == 6.0
    assert cost(2, 1) == pytest.approx(1 + 1 / 3)
    assert cost(1, 2) == pytest.approx(1 + 1 / 3)
    assert cost(8, 4) == pytest.approx(12.0)  # beyond the grid: proportional in slots
    assert BatchCost.from_json(cost.to_json()).table == cost.table
    measured = measure(tiny_target().runner, slots=(1, 2), rows=(1, 3), context=8, repeats=1)
    assert set(measured.table) == {(1, 1), (1, 3), (2, 1), (2, 3)}
    assert all(t > 0 for t in measured.table.values())
    for b, r in measured.table:  # measured tables come out monotone
        assert measured.table[(b, r)] >= max(
            [t for (b2, r2), t in measured.table.items() if b2 <= b and r2 <= r]
        )
    noisy = {(1, 1): 1.0, (1, 2): 0.9, (2, 1): 0.8, (2, 2): 1.5}  # a larger shape timed cheaper
    assert monotone(noisy) == {(1, 1): 1.0, (1, 2): 1.0, (2, 1): 1.0, (2, 2): 1.5}


def test_a_failing_drafter_ends_only_its_own_request():
    target = tiny_target()
    seqs = prompts(3)
    stop = StopRule(16)

    class Broken(NgramDrafter):
        def propose(self, tokens, k, params, generator):
            if tokens.shape[0] > len(seqs[1]) + 3:
                raise RuntimeError("drafter bug")
            return super().propose(tokens, k, params, generator)

    decoder = BatchDecoder(target.runner, 3, 64, "fixed")
    runs = [
        decoder.add(p, d, stop)
        for p, d in zip(seqs, [PlainDrafter(), Broken(k=3), NgramDrafter()], strict=True)
    ]
    finished = {}
    while decoder.running:
        for run in decoder.step():
            finished[run.slot] = run
            decoder.remove(run.slot)
    assert isinstance(finished[runs[1].slot].error, RuntimeError)
    for i in (0, 2):
        assert finished[runs[i].slot].error is None
        assert (
            runs[i].progress.new == speculative_generate(target.runner, PlainDrafter(), seqs[i], stop).tokens
        )


def test_bad_input_is_a_clear_error():
    target = tiny_target()
    decoder = BatchDecoder(target.runner, 1, 32, "fixed")
    with pytest.raises(DraftsmithError, match="a slot holds 32"):
        decoder.add(list(range(3, 40)), PlainDrafter(), StopRule(4))
    with pytest.raises(DraftsmithError, match="empty"):
        decoder.add([], PlainDrafter(), StopRule(4))
    decoder.add([5, 6], PlainDrafter(), StopRule(4))
    with pytest.raises(DraftsmithError, match="no free slot"):
        decoder.add([5, 6], PlainDrafter(), StopRule(4))
    with pytest.raises(DraftsmithError, match="unknown schedule"):
        BatchDecoder(target.runner, 1, 32, "sometimes")
    with pytest.raises(DraftsmithError, match="Llama-family"):
        BatchDecoder(tiny_target("gemma3_text").runner, 1, 32)
    target.runner.set_fixed_rows(4)
    try:
        with pytest.raises(DraftsmithError, match="float32"):
            BatchDecoder(target.runner, 1, 32)
    finally:
        target.runner.set_fixed_rows(0)


def test_scheduled_steps_skip_drafting_when_it_costs_more_than_it_buys(monkeypatch):
    """Drafting is per request while the verify step is shared: with a slow drafter and rows that
    cost extra, the scheduler falls back to plain steps (exploring now and then), stays lossless,
    and drafts again when drafting is cheap. The gate's live timers read a fake clock (1 ms a
    reading), so the decisions are the same on every run: on the wall clock the slow run drafted
    20, 32 or 80 tokens from run to run, and a CI run failed the old 3x bound."""
    ticks = iter(range(10**9))
    monkeypatch.setattr(batch_decode, "now", lambda device: next(ticks) * 1e-3)
    target = tiny_target()
    seqs = prompts(3)
    stop = StopRule(40)
    ref = [speculative_generate(target.runner, PlainDrafter(), p, stop).tokens for p in seqs]
    oracle = DraftModelDrafter(tiny_model("llama", layers=4), VOCAB, k=4)  # always right
    cost = lambda b, rows: 1.0 + 0.1 * (rows - 1)  # noqa: E731 - a step costs ~1 s whatever the batch

    def run(draft_seconds: float) -> tuple[list, int]:
        decoder = BatchDecoder(target.runner, 3, 64, "confidence", cost)
        frozen = DraftTime()
        frozen.observe(1, draft_seconds)
        frozen.observe = lambda n, seconds: None  # keep it: the live clock would measure ~0 here
        decoder.draft_time = {oracle.name: frozen}
        out = batch_generate(decoder, seqs, [oracle.fork() for _ in seqs], stop)
        assert all(v >= 0 for v in decoder.overhead.values())  # each kind of step it ran is timed
        assert any(not drafted for drafted, _ in decoder.overhead) == (draft_seconds > 0)
        return [t for t, _, _ in out], sum(s.drafted for _, _, s in out)

    cheap_tokens, cheap_drafted = run(0.0)  # drafting time is on the live clock (ms steps here)
    slow_tokens, slow_drafted = run(10.0)
    assert cheap_tokens == ref and slow_tokens == ref
    assert cheap_drafted > slow_drafted > 0  # slow: plain steps too (run() checks), fewer drafts


def test_one_request_alone_drafts_as_generate_sizes_it():
    """With one request there is no shared step for drafting to slow down: the gate stands aside
    and the request drafts as its own acceptance sizes it (as `generate` does), even where the
    gate's forecast (a slow drafting-time fit here) would decline."""
    target = tiny_target()
    oracle = DraftModelDrafter(tiny_model("llama", layers=4), VOCAB, k=4)  # always right
    decoder = BatchDecoder(target.runner, 2, 64, "confidence", lambda b, rows: 1.0 + 0.1 * (rows - 1))
    frozen = DraftTime()
    frozen.observe(1, 10.0)
    frozen.observe = lambda n, seconds: None
    decoder.draft_time = {oracle.name: frozen}
    decoder.catchup_time = {oracle.name: frozen}  # steady and catch-up calls alike
    prompt = prompts(1)[0]
    ref = speculative_generate(target.runner, PlainDrafter(), prompt, StopRule(30)).tokens
    [(tokens, _, stats)] = batch_generate(decoder, [prompt], [oracle.fork()], StopRule(30))
    assert tokens == ref
    assert stats.drafted >= len(ref) // 2  # drafted on (nearly) every step, not only on explore steps
    runs = [decoder.add(p, oracle.fork(), StopRule(8)) for p in prompts(2)]
    assert not decoder._drafting_pays(runs)  # two requests: the gate decides, and declines


def _gate_at_two_slots(schedule: str = "confidence"):
    """Two requests in a decoder whose table makes extra rows look cheap, the method's history at
    one of two drafts kept (~1.5 tokens a round), a fast drafting-time fit and the table's live
    ratios at 1: a setting where drafting pays by the forecast. Returns (decoder, oracle, runs)."""
    target = tiny_target()
    cost = lambda b, rows: 0.05 * (1 + 0.1 * (rows - 1))  # noqa: E731 - extra rows look cheap
    decoder = BatchDecoder(target.runner, 2, 64, schedule, cost)
    oracle = DraftModelDrafter(tiny_model("llama", layers=4), VOCAB, k=2)
    for p in prompts(2):
        decoder.add(p, oracle.fork(), StopRule(8))
    runs = list(decoder.running.values())
    for _ in range(50):
        decoder.history(runs[0]).update(2, 1)
    decoder.draft_time = {oracle.name: DraftTime()}
    decoder.draft_time[oracle.name].observe(6, 0.001)
    decoder.cost_scale = {(True, 2): 1.0, (False, 2): 1.0}  # keyed (drafted?, load: 2 slots)
    return decoder, oracle, runs


def test_the_gate_prices_each_kind_of_step_at_its_own_measured_speed():
    """The table can be wrong about how much more a drafting step's extra rows cost (measured on
    another day or path); the gate must price drafting steps at the live/table ratio seen on
    drafting steps, not at the plain steps' ratio."""
    decoder, _, runs = _gate_at_two_slots()
    assert decoder._drafting_pays(runs)  # as the table says: 3 rows for ~1.1x one
    decoder.cost_scale = {(True, 2): 2.0, (False, 2): 1.0}  # drafting steps measured twice the table
    assert not decoder._drafting_pays(runs)
    decoder.cost_scale = {(False, 2): 1.0}  # no drafting step seen yet: the plain steps' ratio
    assert decoder._drafting_pays(runs)
    # drafting measured slow at another load only: this load's plain ratio is the better guess
    decoder.cost_scale = {(True, 16): 2.0, (False, 2): 1.0}
    assert decoder._drafting_pays(runs)
    decoder.cost_scale = {(True, 4): 2.0}  # nothing at this load: the nearest load of this kind
    assert not decoder._drafting_pays(runs)


def test_the_gate_learns_how_far_off_its_forecast_of_each_kind_of_step_runs():
    """The forecast is built from parts (drafting-time fit, per-slot overhead, table x live ratio),
    and what they miss (a drafting spell's first step feeding its backlog, slow steps) made the
    gate draft where drafting lost (4 users: forecast 7% faster, measured 12% slower). The gate
    keeps real step time / forecast per decision and load, and prices the next steps with it."""
    decoder, _, runs = _gate_at_two_slots()
    assert decoder._drafting_pays(runs)
    drafting, slots, forecast = decoder._forecast  # what the chosen step was forecast to take
    assert drafting and slots == 2 and forecast > 0
    _, raw_drafting_s, _, raw_plain_s, _ = decoder.drafting_estimate(runs)
    decoder.forecast_error = {(True, 2): 2.0}  # drafting steps ran 2x their forecast here
    _, drafting_s, _, plain_s, _ = decoder.drafting_estimate(runs)
    assert drafting_s == pytest.approx(2.0 * raw_drafting_s) and plain_s == pytest.approx(raw_plain_s)
    assert not decoder._drafting_pays(runs)
    assert decoder._forecast[0] is False and decoder._forecast[2] == pytest.approx(raw_plain_s)
    decoder.forecast_error = {(True, 8): 2.0}  # only another load measured: the nearest of this decision
    assert not decoder._drafting_pays(runs)
    decoder.forecast_error = {(False, 2): 2.0}  # plain steps slow: never applied to drafting
    _, drafting_s, _, plain_s, _ = decoder.drafting_estimate(runs)
    assert drafting_s == pytest.approx(raw_drafting_s) and plain_s == pytest.approx(2.0 * raw_plain_s)
    # a real step folds its time / forecast (bounded) into the running mean of its decision and load
    decoder.forecast_error = {}
    decoder._explore_at = decoder.steps + 10
    decoder.step()
    assert set(decoder.forecast_error) <= {(True, 2), (False, 2)} and decoder.forecast_error
    # from a prior of 1: one step moves it a tenth of the way (a fresh gate's first drafting step
    # is forecast without drafting time, and taking it whole kept one user from drafting)
    bound = FORECAST_ERROR_BOUND
    assert all(0.9 + 0.1 / bound <= v <= 0.9 + 0.1 * bound for v in decoder.forecast_error.values())
    # an explore step halves the correction of the kind of step the gate is not taking
    decoder.forecast_error = {(True, 2): 2.0, (False, 2): 0.8}
    decoder._drafting, decoder._explore_at = False, decoder.steps + 1
    decoder.step()
    assert decoder.forecast_error[(True, 2)] == pytest.approx(1.5)


def test_the_gate_prices_the_drafts_each_request_will_make_not_its_full_k():
    """Each request sizes its draft on its own acceptance before drafting; the gate's forecast must
    price that draft, not the method's k (DSpark's k = 7 against ~3 drafted doubled the forecast
    drafting time at one user, and the gate declined where drafting made 1.27x)."""
    decoder, oracle, runs = _gate_at_two_slots()
    for run in runs:
        run.k = 6
        for _ in range(50):
            run.own.update(2, 1)  # its first draft is kept, its second never
    sized = [decoder._sized(run, run.k) for run in runs]
    assert sized == [1, 1]
    decoder.draft_time = {oracle.name: DraftTime()}
    decoder.draft_time[oracle.name].observe(6, 6.0)  # 1 s per draft position: drafting dominates
    _, drafting_s, _, _, depth = decoder.drafting_estimate(runs)
    assert depth == 1
    assert drafting_s == pytest.approx(sum(k + 1 for k in sized), abs=0.5)  # not 2 x (6 + 1)


def test_a_catch_up_drafting_call_is_priced_by_catch_ups_not_at_zero():
    """A drafting call that first feeds a backlog (a request that did not draft last step) is timed
    apart from steady drafting. A gate that rarely drafts sees only catch-ups: it must price its next
    (catch-up) drafting step by them, not at 0 for want of a steady measurement (at 8 users drafting
    steps once ran 76 ms against a 55 ms forecast)."""
    decoder, oracle, runs = _gate_at_two_slots()
    for run in runs:
        run.k = 2
        run.drafted_last = False
    decoder.draft_time, decoder.catchup_time = {}, {oracle.name: DraftTime()}
    decoder.catchup_time[oracle.name].observe(6, 6.0)  # a catch-up call: 1 s per unit
    sized = [decoder._sized(run, run.k) for run in runs]
    _, drafting_s, *_ = decoder.drafting_estimate(runs)
    assert drafting_s >= sum(k + 1 for k in sized) - 0.5  # the catch-up time, not 0
    decoder.draft_time = {oracle.name: DraftTime()}
    decoder.draft_time[oracle.name].observe(6, 0.06)  # steady drafting is 100x cheaper
    _, still_catching_up, *_ = decoder.drafting_estimate(runs)
    assert still_catching_up == pytest.approx(drafting_s)  # these requests did not draft last step
    for run in runs:
        run.drafted_last = True
    _, steady_s, *_ = decoder.drafting_estimate(runs)
    assert steady_s < drafting_s - sum(k + 1 for k in sized) + 0.5


def test_a_long_refusal_explores_less_and_a_marginal_gain_does_not_draft():
    """While the gate keeps declining at one load, explore steps (a ragged step nobody wanted)
    come at doubling intervals up to a cap; a new load or a return to drafting starts over. And a
    drafting step forecast only a little faster than a plain one (inside the margin) is not
    started, but a drafting spell goes on while it is forecast to gain at all."""
    target = tiny_target()
    decoder = BatchDecoder(target.runner, 2, 64, "confidence", lambda b, rows: 1.0)
    decoder._drafting = False
    first, last = DECLINED_EVERY
    intervals = [decoder._explore_interval(16) for _ in range(6)]
    assert intervals == [first, 2 * first, 4 * first, min(8 * first, last), last, last]
    assert decoder._explore_interval(3) == first  # another load: measure it afresh
    decoder._drafting = True
    assert decoder._explore_interval(3) == EXPLORE_EVERY
    decoder._drafting = False
    assert decoder._explore_interval(3) == first  # drafting paid in between: start over
    with pytest.raises(DraftsmithError, match="margin"):
        BatchDecoder(target.runner, 2, 64, "confidence", lambda b, rows: 1.0, margin=-1)

    oracle = DraftModelDrafter(tiny_model("llama", layers=4), VOCAB, k=2)
    for p in prompts(2):
        decoder.add(p, oracle.fork(), StopRule(8))
    runs = list(decoder.running.values())
    for _ in range(50):
        decoder.history(runs[0]).update(2, 2)
    decoder.draft_time = {oracle.name: DraftTime()}
    decoder.draft_time[oracle.name].observe(6, 0.0)
    decoder.cost_scale = {(True, 2): 1.0, (False, 2): 1.0}
    expected, drafting_s, plain_tokens, plain_s, _ = decoder.drafting_estimate(runs)
    gain = (expected / drafting_s) / (plain_tokens / plain_s)  # ~3x: 3 tokens a step at equal cost
    decoder.margin = gain - 1 - 0.01
    assert decoder._drafting_pays(runs)
    decoder.margin = gain - 1 + 0.01
    assert not decoder._drafting_pays(runs)
    decoder._drafting = True  # already drafting: it goes on while drafting is forecast to gain at all
    assert decoder._drafting_pays(runs)


def test_a_draft_that_first_feeds_a_backlog_is_not_timed():
    """A request's first draft, or its first after plain steps, first feeds the states queued
    meanwhile (its prompt's too); timing it would price drafting by its catch-up, and a gate that
    rarely drafts would only ever see catch-ups. Steady drafting steps are timed."""
    target = tiny_target()
    base = DSparkDrafter.build(target, DFlashDecodeOptions(drafter=make_drafter(target, dspark=True)))
    decoder = BatchDecoder(target.runner, 1, 64, "fixed")
    decoder.add(prompts(1)[0], base.fork(), StopRule(30))
    steps = 0
    while decoder.running and steps < 5:
        decoder.step()
        steps += 1
    calls = decoder.draft_time[base.name].calls
    assert steps == 5 and len(calls) == steps - 1  # all but the first, which fed the prompt


def test_measurements_are_kept_per_load_and_ragged_steps_priced_by_their_real_rows():
    """A step's live/table ratio is filed under its kind and load, and a ragged step is compared
    with what its real rows cost (slots.py multiplies only those), not with the padded shape."""
    cost = lambda b, rows: b * (1.0 + (rows - 1))  # noqa: E731 - every row of every slot costs 1
    assert ragged_cost(cost, [1, 1, 1, 1]) == cost(4, 1)
    assert ragged_cost(cost, [4, 4, 4, 4]) == cost(4, 4)
    assert ragged_cost(cost, [4, 1, 1, 1]) == 7.0  # 4 + 3 extra rows, not 16
    assert [load(b) for b in (1, 2, 3, 4, 5, 16, 17, 32)] == [1, 2, 4, 4, 8, 16, 32, 32]
    means = {(True, 1): 0.5, (False, 16): 1.2, (True, 32): 1.5}
    assert nearest(means, True, 1, 9.0) == 0.5
    assert nearest(means, True, 16, 9.0) == 1.2  # this load's plain steps before another load's drafting
    assert nearest(means, False, 8, 9.0) == 1.2  # the nearest load of this kind
    assert nearest({}, True, 8, 9.0) == 9.0
    target = tiny_target()
    decoder = BatchDecoder(target.runner, 3, 64, "confidence", lambda b, rows: 1e-3 * b * rows)
    batch_generate(decoder, prompts(3), [PlainDrafter() for _ in range(3)], StopRule(6))
    assert decoder.cost_scale and all(load_ in (1, 2, 4) for _, load_ in decoder.cost_scale)


@pytest.mark.parametrize("dspark", [False, True])
def test_batched_drafting_equals_drafting_one_by_one(dspark):
    """DFlash/DSpark forks draft in one forward (each over its own context, padded to the longest):
    the drafts, their distributions and DSpark's confidences are those of drafting alone."""
    target = tiny_target()
    base = (
        DSparkDrafter.build(target, DFlashDecodeOptions(drafter=make_drafter(target, dspark=True)))
        if dspark
        else (DFlashDrafter.build(target, DFlashDecodeOptions(drafter=make_drafter(target, dspark=False))))
    )
    base.threshold = 0.3 if dspark else 0.0  # some drafts stop early on their own survival
    seqs = [torch.tensor(p) for p in prompts(4)]
    runner = SlotRunner(target.runner, len(seqs), 64)
    forks = [base.fork() for _ in seqs]
    for slot, (fork, ids) in enumerate(zip(forks, seqs, strict=True)):
        hidden = (
            runner.forward([(slot, ids[:-1])], fork.hidden_layers, n_logits=0)[0].hidden
            if len(ids) > 1
            else {}
        )
        fork.start(ids, hidden, 64)
    ks = [5, 2, 4, 0]
    params = [SamplingParams(), SamplingParams(temperature=0.8), SamplingParams(), SamplingParams()]
    gens = [None, torch.Generator().manual_seed(1), None, None]
    together = type(base).propose_batch(forks, seqs, ks, params, gens)
    confidences = [list(f.confidences) for f in forks]
    gens[1] = torch.Generator().manual_seed(1)
    for i, (fork, ids) in enumerate(zip(forks, seqs, strict=True)):
        alone = fork.propose(ids, ks[i], params[i], gens[i])
        assert together[i].tokens.tolist() == alone.tokens.tolist()
        assert len(together[i].tokens) <= ks[i]
        if alone.probs is None:
            assert together[i].probs is None
        else:
            torch.testing.assert_close(together[i].probs, alone.probs, atol=1e-5, rtol=1e-4)
        assert confidences[i] == pytest.approx(fork.confidences, abs=1e-5)
    assert not dspark or any(len(d.tokens) < k for d, k in zip(together, ks, strict=True) if k)


def test_drafting_time_scales_with_the_group_it_was_measured_on():
    one = DraftTime()
    assert one(4) == 0.0
    one.observe(2, 0.02)
    assert one(8) == pytest.approx(0.08)  # one group size seen: proportional
    line = DraftTime()
    for n, t in [(1, 0.011), (8, 0.018), (2, 0.012), (8, 0.018)]:
        line.observe(n, t)
    assert line(32) == pytest.approx(0.010 + 0.001 * 32, rel=0.05)  # batched: a + c n


def test_batched_accept_fills_each_context_cache_as_accepting_alone():
    target = tiny_target()
    base = DSparkDrafter.build(target, DFlashDecodeOptions(drafter=make_drafter(target, dspark=True)))
    seqs = [torch.tensor(p) for p in prompts(8) if len(p) >= 5][:3]
    assert len(seqs) == 3
    runner = SlotRunner(target.runner, len(seqs), 64)
    hidden = [
        runner.forward([(s, ids)], base.hidden_layers, n_logits=0)[0].hidden for s, ids in enumerate(seqs)
    ]
    together, alone = [base.fork() for _ in seqs], [base.fork() for _ in seqs]
    for forks in (together, alone):
        for fork, ids, h in zip(forks, seqs, hidden, strict=True):
            fork.start(ids, {key: v[: len(ids) - 3] for key, v in h.items()}, 64)  # 3 rows left over
    sizes = [3, 1, 2]
    new = [
        {key: v[len(ids) - 3 : len(ids) - 3 + n] for key, v in h.items()}
        for ids, h, n in zip(seqs, hidden, sizes, strict=True)
    ]
    type(base).accept_batch(together, seqs, sizes, new)
    for fork, ids, n, h in zip(alone, seqs, sizes, new, strict=True):
        fork.accept(ids, n, h)
    assert all(d.n_ctx == 0 and len(d.pending) == 2 for d in together)  # prompt and new states queued
    type(base).flush(together + alone)
    for a, b in zip(together, alone, strict=True):
        assert a.n_ctx == b.n_ctx
        torch.testing.assert_close(a.last_ctx, b.last_ctx, atol=1e-5, rtol=1e-4)
        for ka, kb in zip(a.ctx_k + a.ctx_v, b.ctx_k + b.ctx_v, strict=True):
            torch.testing.assert_close(ka[:, :, : a.n_ctx], kb[:, :, : b.n_ctx], atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("budget", [None, 2000])
def test_a_request_that_does_not_draft_queues_its_states_and_then_drafts_as_if_fed_every_round(
    monkeypatch, budget
):
    """Its prompt's states too; the queue is fed at the next draft, or once it holds QUEUE_BYTES."""
    from draftsmith.engine import drafter as drafter_base

    if budget:
        monkeypatch.setattr(drafter_base, "QUEUE_BYTES", budget)
    target = tiny_target()
    base = DSparkDrafter.build(target, DFlashDecodeOptions(drafter=make_drafter(target, dspark=True)))
    ids = torch.randint(3, VOCAB, (40,), generator=torch.Generator().manual_seed(1))
    runner = SlotRunner(target.runner, 1, 64)
    h = runner.forward([(0, ids)], base.hidden_layers, n_logits=0)[0].hidden
    queued, fed = base.fork(), base.fork()
    for d in (queued, fed):
        d.start(ids[:10], {key: v[:9] for key, v in h.items()}, 64)
    for end in range(11, 40):  # one token a round, no drafting: 29 rounds
        one = {key: v[end - 2 : end - 1] for key, v in h.items()}
        queued.accept(ids[:end], 1, one)
        fed.accept(ids[:end], 1, one)
        type(base).flush([fed])
        assert queued.pending_bytes < drafter_base.QUEUE_BYTES  # bounded however long it goes undrafted
    assert queued.n_ctx < fed.n_ctx == 38
    assert (queued.n_ctx > 0) == bool(budget)  # without a small budget, nothing fed, not even the prompt
    a, b = (d.propose(ids[:39], 4, SamplingParams(), None) for d in (queued, fed))
    assert queued.n_ctx == 38 and torch.equal(a.tokens, b.tokens)
    assert queued.confidences == pytest.approx(fed.confidences, abs=1e-5)


def test_each_request_sizes_its_draft_on_its_own_acceptance():
    """Acceptance differs between prompts; a pooled history averages it away and the batched
    decoder verified deeper drafts than the single-request loop for the same tokens.
    Under a non-fixed schedule each request's draft is sized before drafting on its own history:
    a request whose drafts are never accepted stops drafting while its neighbour goes on."""
    target = tiny_target()
    for schedule in ("history", "confidence"):
        decoder = BatchDecoder(target.runner, 2, 64, schedule, lambda b, rows: 1.0 + 0.1 * rows)
        oracle = DraftModelDrafter(tiny_model("llama", layers=4), VOCAB, k=2)
        runs = [decoder.add(p, oracle.fork(), StopRule(8)) for p in prompts(2)]
        for _ in range(50):
            runs[0].own.update(2, 0)  # nothing of this request's drafts is ever kept
            runs[1].own.update(2, 2)  # everything of this one's is
        decoder._explore_at = decoder.steps + 100
        decoder.step()
        assert runs[0].stats.drafted == 0, schedule
        assert runs[1].stats.drafted > 0, schedule
