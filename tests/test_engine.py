"""Engine correctness on tiny random models: exact backends, KV rollback, losslessness, stopping."""

from __future__ import annotations

import os
import time

import pytest
import torch
from conftest import ARCHS, VOCAB, tiny_model

from draftsmith.drafters.draft_model import DraftModelDrafter
from draftsmith.drafters.ngram import NgramDrafter
from draftsmith.drafters.plain import PlainDrafter
from draftsmith.engine.backends import make_runner
from draftsmith.engine.decode import StopRule, speculative_generate
from draftsmith.engine.drafter import Draft, Drafter
from draftsmith.engine.runner import FINAL
from draftsmith.errors import DraftsmithError


def prompt(seed: int = 0, n: int = 24) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(3, VOCAB, (n,), generator=g)


def perturbed_copy(model, scale: float = 0.3, seed: int = 1):
    """A draft model that agrees with the target often but not always."""
    arch = model.config.model_type
    draft = tiny_model(arch)  # same seed -> same weights
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in draft.parameters():
            p.add_(torch.randn(p.shape, generator=g) * p.std() * scale)
    return draft


def drafters_for(model) -> dict[str, Drafter]:
    return {
        "plain": PlainDrafter(),
        "ngram": NgramDrafter(k=5, max_ngram=3),
        "draft-model": DraftModelDrafter(perturbed_copy(model), VOCAB, k=4),
    }


@pytest.mark.parametrize("arch", list(ARCHS))
def test_runner_matches_full_forward_in_chunks(arch):
    model = tiny_model(arch)
    ids = prompt(n=30)
    ref = model(ids[None], output_hidden_states=True)
    backends = ["hf", "lean"] if arch in ("llama", "qwen3") else ["hf"]
    for backend in backends:
        runner = make_runner(model, backend)
        runner.reset(64)
        parts = [
            runner.forward(ids[a:b], n_logits=b - a, hidden=(0, 1)) for a, b in [(0, 11), (11, 12), (12, 30)]
        ]
        logits = torch.cat([p.logits for p in parts])
        torch.testing.assert_close(logits, ref.logits[0], atol=1e-4, rtol=1e-4)
        for key in (0, 1):
            h = torch.cat([p.hidden[key] for p in parts])
            torch.testing.assert_close(h, ref.hidden_states[key][0], atol=1e-4, rtol=1e-4)


def test_lean_final_hidden_is_normed_last_layer():
    model = tiny_model("llama")
    ids = prompt(n=10)
    runner = make_runner(model, "lean")
    runner.reset(16)
    out = runner.forward(ids, n_logits=10, hidden=(FINAL,))
    torch.testing.assert_close(model.lm_head(out.hidden[FINAL]), out.logits)


@pytest.mark.parametrize("arch", list(ARCHS))
def test_kv_rollback_equals_fresh_computation(arch):
    model = tiny_model(arch)
    ids = prompt(n=20)
    runner = make_runner(model)
    runner.reset(40)
    runner.forward(ids[:12], n_logits=0)
    runner.forward(torch.tensor([5, 6, 7, 8, 9]), n_logits=5)  # a rejected draft block
    runner.rollback(12)
    after = runner.forward(ids[12:], n_logits=8).logits
    ref = model(ids[None]).logits[0, 12:]
    torch.testing.assert_close(after, ref, atol=1e-4, rtol=1e-4)
    with pytest.raises(ValueError):
        runner.rollback(runner.length + 1)


@pytest.mark.parametrize("arch", list(ARCHS))
def test_greedy_is_token_identical_for_every_method(arch):
    model = tiny_model(arch)
    runner = make_runner(model)
    for seed in range(3):
        ids = prompt(seed)
        hf = model.generate(ids[None], max_new_tokens=40, do_sample=False, eos_token_id=None, pad_token_id=0)
        expected = hf[0, len(ids) :].tolist()
        for name, drafter in drafters_for(model).items():
            res = speculative_generate(runner, drafter, ids, StopRule(40))
            assert res.tokens == expected, (arch, name, seed)
            assert res.finish_reason == "length"
            if name != "plain":
                assert res.stats.rounds < 40 or res.stats.drafted > 0


def test_speculation_actually_accepts_tokens():
    model = tiny_model("llama")
    res = speculative_generate(
        make_runner(model), DraftModelDrafter(perturbed_copy(model, 0.05), VOCAB, k=4), prompt(), StopRule(40)
    )
    assert res.stats.accepted > 0 and res.stats.tau > 1.5
    assert res.stats.produced == 40 and res.stats.rounds < 40
    by_pos = res.stats.acceptance_by_position
    assert len(by_pos) == 4 and all(0.0 <= a <= 1.0 for a in by_pos)


class ScriptedDrafter(Drafter):
    """Proposes exactly the target's future tokens (read from a reference run): everything is accepted."""

    name = "scripted"
    default_k = 6

    def __init__(self, future: list[int]):
        self.future = future
        self.n0 = None

    def start(self, prompt, hidden, max_len):
        self.n0 = len(prompt)

    def propose(self, tokens, k, params, generator):
        done = len(tokens) - self.n0
        return Draft(torch.tensor(self.future[done : done + k], dtype=torch.long))


def test_exact_max_new_tokens_and_eos_inside_accepted_block():
    model = tiny_model("llama")
    runner = make_runner(model)
    ids = prompt(3)
    ref = speculative_generate(runner, PlainDrafter(), ids, StopRule(30)).tokens
    for n in (1, 2, 7, 13):
        res = speculative_generate(runner, ScriptedDrafter(ref), ids, StopRule(n))
        assert res.tokens == ref[:n] and res.finish_reason == "length"
    # choose an EOS id that appears mid-sequence, inside a fully accepted block
    eos_pos = next(i for i in range(3, 30) if ref[i] not in ref[:i])
    eos = ref[eos_pos]
    for drafter in (ScriptedDrafter(ref), PlainDrafter()):
        res = speculative_generate(runner, drafter, ids, StopRule(30, eos_ids=frozenset({eos})))
        assert res.tokens == ref[:eos_pos] and res.finish_reason == "eos"
    scripted = speculative_generate(runner, ScriptedDrafter(ref), ids, StopRule(30, eos_ids=frozenset({eos})))
    assert scripted.stats.produced == eos_pos + 1  # EOS counted, nothing after it


def test_stop_strings_stop_at_the_same_token_for_every_method():
    model = tiny_model("llama")
    runner = make_runner(model)
    ids = prompt(4)

    def decode(toks):
        return "".join(chr(ord("a") + t % 26) for t in toks)

    ref = speculative_generate(runner, PlainDrafter(), ids, StopRule(30)).tokens
    stop_text = decode(ref[9:11])  # a two-token string completing at token 11
    first = decode(ref).find(stop_text)
    rule = StopRule(30, stop_strings=(stop_text,), decode=decode)
    for drafter in (PlainDrafter(), ScriptedDrafter(ref), NgramDrafter(k=4)):
        res = speculative_generate(runner, drafter, ids, rule)
        assert res.finish_reason == "stop"
        assert stop_text in decode(res.tokens) and stop_text not in decode(res.tokens[:-1])
        assert decode(res.tokens).find(stop_text) == first


def test_generation_stops_at_the_context_limit():
    model = tiny_model("llama")  # max_position_embeddings = 256
    runner = make_runner(model)
    ids = prompt(n=250)
    res = speculative_generate(runner, NgramDrafter(k=5), ids, StopRule(100))
    plain = speculative_generate(runner, PlainDrafter(), ids, StopRule(100))
    assert len(res.tokens) == 6 and res.finish_reason == "context"
    assert res.tokens == plain.tokens


def test_bad_engine_inputs_are_clear_errors():
    runner = make_runner(tiny_model("llama"))
    with pytest.raises(DraftsmithError, match="empty"):
        speculative_generate(runner, PlainDrafter(), [], StopRule(5))
    with pytest.raises(DraftsmithError, match="context"):
        speculative_generate(runner, PlainDrafter(), prompt(n=300), StopRule(5))
    for bad in (0, -3, 2.5, True):
        with pytest.raises(DraftsmithError, match="max_new_tokens"):
            StopRule(bad)
    with pytest.raises(DraftsmithError, match="draft length"):
        speculative_generate(runner, PlainDrafter(), prompt(), StopRule(5), k=-1)


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("arch", ["llama", "qwen3"])
def test_padded_and_row_major_step_plans_are_exact(arch, packed):
    """Dense weights in both layouts, or oneDNN-packed ones: every plan computes the model."""
    from draftsmith.engine.lean_llama import LeanLlamaRunner

    model = tiny_model(arch)
    ids = prompt(n=30)
    ref = model(ids[None]).logits[0]
    runner = LeanLlamaRunner(model, dual=True, packed=packed)
    assert runner.packed == (packed and torch.backends.mkldnn.is_available())
    assert runner.dual == (not runner.packed)
    runner.plan = {n: (n + 3, n % 2 == 0) for n in range(1, 31)}  # pad every step, mix layouts
    runner.reset(40)
    logits = torch.cat(
        [runner.forward(ids[a:b], n_logits=b - a).logits for a, b in [(0, 7), (7, 8), (8, 30)]]
    )
    torch.testing.assert_close(logits, ref, atol=1e-4, rtol=1e-4)
    # and the HF modules still compute the same function on the re-laid-out weights
    torch.testing.assert_close(model(ids[None]).logits[0], ref, atol=1e-5, rtol=1e-5)


def test_calibration_gives_a_monotone_plan_and_greedy_stays_exact():
    model = tiny_model("llama")
    runner = make_runner(model)
    cost = runner.calibrate(max_rows=6, context=16, repeats=1)
    assert sorted(cost) == list(range(1, 7)) and all(t > 0 for t in cost.values())
    assert all(runner.plan[n][0] >= n for n in cost)
    ids = prompt(5)
    expected = model.generate(
        ids[None], max_new_tokens=30, do_sample=False, eos_token_id=None, pad_token_id=0
    )
    res = speculative_generate(runner, NgramDrafter(k=5, min_ngram=1), ids, StopRule(30))
    assert res.tokens == expected[0, len(ids) :].tolist()


def test_other_load_is_what_the_rest_of_the_machine_took(monkeypatch):
    """Machine-wide busy ticks minus this process's own CPU time, over the machine's total time."""
    import draftsmith.engine.cpu_load as cpu_load

    hz = os.sysconf("SC_CLK_TCK")
    ticks = iter([(0, 0), (30 * hz, 100 * hz)])  # 30 s busy of 100 s of CPU time
    own = iter([1.0, 11.0])  # 10 s of it ours
    monkeypatch.setattr(cpu_load, "_machine_ticks", lambda: next(ticks))
    monkeypatch.setattr(cpu_load, "_own_seconds", lambda pids=(): next(own))
    with cpu_load.OtherLoad() as load:
        pass
    assert load.fraction == pytest.approx(0.2)


def test_other_load_counts_the_servers_we_time_as_ours_and_clamps(monkeypatch):
    """A bench's llama-server peers are other processes to the kernel but our own work: their CPU
    time (from /proc/PID/stat) counts as ours. Our time read a tick late clamps at 0; no tick passed,
    or a server gone, is unknown (and a table timed so is cached as before)."""
    import draftsmith.engine.cpu_load as cpu_load

    hz = os.sysconf("SC_CLK_TCK")
    ticks, server = [], []
    monkeypatch.setattr(cpu_load, "_machine_ticks", lambda: ticks.pop(0))
    monkeypatch.setattr(cpu_load.os, "times", lambda: os.times_result((5.0, 0.0, 0.0, 0.0, 0.0)))
    monkeypatch.setattr(cpu_load, "_process_seconds", lambda pid: server.pop(0))
    monkeypatch.setattr(cpu_load, "_with_descendants", lambda pids: set(pids))

    def share(busy: float, total: float, served: float, pids=(42,)) -> float | None:
        ticks[:] = [(0, 0), (round(busy * hz), round(total * hz))]
        server[:] = [10.0, 10.0 + served]
        with cpu_load.OtherLoad(pids) as load:
            pass
        return load.fraction

    assert share(busy=1.0, total=2.0, served=1.0) == 0.0  # only the server we started was busy
    assert share(busy=1.0, total=2.0, served=0.0) == pytest.approx(0.5)  # someone else was
    assert share(busy=1.0, total=2.0, served=1.5) == 0.0  # clamped
    assert share(busy=0.0, total=0.0, served=0.0) is None  # no tick passed
    ticks[:] = [(0, 0), (hz, 2 * hz)]
    server[:] = [10.0]  # the server exits before the end: /proc/PID/stat is gone
    monkeypatch.setattr(
        cpu_load, "_process_seconds", lambda pid: server.pop(0) if server else (_ for _ in ()).throw(OSError)
    )
    with cpu_load.OtherLoad((42,)) as load:
        pass
    assert load.fraction is None and cpu_load.cacheable(load, "x", "y")


def test_a_servers_own_children_count_as_ours():
    """A vLLM server runs its engine in child processes: their CPU time is the server's."""
    import subprocess

    import draftsmith.engine.cpu_load as cpu_load

    proc = subprocess.Popen(["sh", "-c", "sleep 30 & wait"])
    try:
        for _ in range(100):
            found = cpu_load._with_descendants((proc.pid,))
            if len(found) >= 2:
                break
            time.sleep(0.02)
        assert proc.pid in found and len(found) >= 2  # the shell and its sleep
        assert os.getpid() not in found
    finally:
        proc.kill()
        proc.wait()


def test_a_step_table_timed_under_load_serves_the_run_but_is_not_cached(monkeypatch, tmp_path, caplog):
    """A plan measured while another job ran was cached and steered every later run (drafts
    of 1 token a round followed). Under load the table is used once, with the command that measures
    again; on a quiet machine it is cached and reused."""
    import draftsmith.engine.cpu_load as cpu_load

    monkeypatch.setenv("DRAFTSMITH_DATA", str(tmp_path))
    calls = []

    class Loaded(cpu_load.OtherLoad):
        def __exit__(self, *exc):
            self.fraction = share

    monkeypatch.setattr("draftsmith.engine.lean_llama.OtherLoad", Loaded)
    runner = make_runner(tiny_model("llama"))
    real = runner.calibrate
    runner.calibrate = lambda: calls.append(1) or real(max_rows=4, context=16, repeats=1)
    share = 0.6
    with caplog.at_level("WARNING", logger="draftsmith"):
        cost = runner.calibrate_cached()
    assert sorted(cost) == [1, 2, 3, 4] and runner.measured_cost == cost
    assert "not cached" in caplog.text and "draftsmith calibrate --force" in caplog.text
    assert not list((tmp_path / "calibration").glob("*.json"))
    caplog.clear()
    share = 0.01
    with caplog.at_level("WARNING", logger="draftsmith"):
        runner.calibrate_cached()
    assert not caplog.text and len(list((tmp_path / "calibration").glob("*.json"))) == 1
    assert runner.calibrate_cached() == runner.measured_cost and len(calls) == 2  # reused


def test_a_batched_table_timed_under_load_is_not_cached(monkeypatch, tmp_path, caplog):
    import draftsmith.engine.batch_cost as batch_cost
    import draftsmith.engine.cpu_load as cpu_load

    class Loaded(cpu_load.OtherLoad):
        def __exit__(self, *exc):
            self.fraction = 0.7

    monkeypatch.setenv("DRAFTSMITH_DATA", str(tmp_path))
    monkeypatch.setattr(batch_cost, "OtherLoad", Loaded)
    monkeypatch.setattr(batch_cost, "measure", lambda runner: "table")
    with caplog.at_level("WARNING", logger="draftsmith"):
        assert batch_cost.cached(make_runner(tiny_model("llama"))) == "table"
    assert "calibrate --force --batch" in caplog.text
    assert not (tmp_path / "calibration").exists() or not list((tmp_path / "calibration").iterdir())


def test_the_lm_head_takes_its_own_layout_and_both_layouts_agree():
    """The vocabulary-wide head runs [in, out] up to HEAD_SMALL rows whatever the step's layers use;
    either way its logits are the same function of the rows."""
    from draftsmith.engine.lean_llama import HEAD_SMALL

    runner = make_runner(tiny_model("llama"))
    head = runner.lm_head
    calls = []
    real = head.__class__.__call__
    runner.lm_head = lambda x, row_major=False: calls.append(row_major) or real(head, x, row_major)
    x = torch.randn(HEAD_SMALL + 1, head.w_t.shape[0])
    small, large = runner.logits(x[:HEAD_SMALL]), runner.logits(x)
    assert calls == [False, True]
    torch.testing.assert_close(small, large[:HEAD_SMALL], atol=1e-5, rtol=1e-5)


def _histories():
    """Running acceptance of 50 rounds of 4 drafts: all accepted (good), none accepted (bad)."""
    from draftsmith.engine.draft_length import AcceptanceHistory

    good, bad = AcceptanceHistory(), AcceptanceHistory()
    for _ in range(50):
        good.update(4, 4)
        bad.update(4, 0)
    return good, bad


def test_draft_length_policy_truncates_unprofitable_drafts():
    from draftsmith.engine.draft_length import history_length, table_cost

    cost = table_cost({1: 1.0, 2: 1.5, 3: 1.6, 4: 1.7, 5: 2.0})
    good, bad = _histories()
    assert history_length(good, 4, cost) == 4
    assert history_length(bad, 4, cost) == 0
    assert history_length(bad, 3, table_cost({})) == 3  # no cost table: keep the draft
    assert history_length(good, 4, table_cost({1: 1.0, 2: 1.1})) == 1  # unmeasured rows are never chosen


def test_one_request_is_sized_as_a_batch_of_one():
    """The single and batched decoders share one policy: a request's length is best_depth over it alone."""
    from draftsmith.engine.draft_length import best_depth, history_length, survival_from_history

    good, bad = _histories()
    for cost in (lambda b, r: 1.0 + 0.1 * r, lambda b, r: 1.0 + 0.6 * (r - 1), lambda b, r: float(r)):
        for h in (good, bad):
            assert history_length(h, 4, cost) == best_depth([survival_from_history(h, 4)], cost, 4)


def test_modelled_rate_is_the_history_models_best_tokens_per_second():
    """The prob rule prices a row at this rate: from the step costs and running acceptance only."""
    from draftsmith.engine.draft_length import history_length, modelled_rate, table_cost

    cost = {1: 1.0, 2: 1.5, 3: 1.6, 4: 1.7, 5: 2.0}
    good, bad = _histories()
    assert modelled_rate(4, cost, bad) == pytest.approx(1.0)  # no draft pays: one token a plain step
    k = history_length(good, 4, table_cost(cost))
    survive = [good.conditional(0)]
    for i in range(1, k):
        survive.append(survive[-1] * good.conditional(i))
    assert modelled_rate(4, cost, good) == pytest.approx((1 + sum(survive)) / cost[k + 1])
    assert modelled_rate(0, cost, good) == pytest.approx(1.0)


def test_length_by_probs_keeps_the_drafts_their_probabilities_pay_for():
    from draftsmith.engine.draft_length import length_by_probs

    cost, rate = {1: 1.0, 2: 1.5, 3: 1.6, 4: 1.7}, 1.0  # at 1 token/s an extra 0.5 s costs half a token
    assert length_by_probs([0.95, 0.9, 0.9], 3, cost, rate) == 3
    assert length_by_probs([0.95, 0.9, 0.9], 2, cost, rate) == 2  # never beyond what the engine asks
    assert length_by_probs([0.1, 0.9, 0.9], 3, cost, rate) == 0  # a likely miss first: no draft pays
    assert length_by_probs([0.6, 0.1], 2, cost, rate) == 1  # the second draft is not worth its row
    assert length_by_probs([0.01] * 3, 3, dict.fromkeys(range(1, 5), 1.0), rate) == 3  # free rows
    assert length_by_probs([0.1], 1, {}, rate) == 1  # no cost table: keep the draft


class HiddenRecorder(Drafter):
    """Asks for target hidden states and keeps them, to check the engine hands over the right rows."""

    name = "recorder"
    hidden_layers = (1, FINAL)
    default_k = 3

    def start(self, prompt, hidden, max_len):
        self.rows = {key: [h] for key, h in hidden.items()}

    def propose(self, tokens, k, params, generator):
        return NgramDrafter(k=k, min_ngram=1).propose(tokens, k, params, generator)

    def accept(self, tokens, n_new, hidden):
        for key, h in hidden.items():
            assert h.shape[0] == n_new
            self.rows[key].append(h)


@pytest.mark.parametrize("arch", ["llama", "gemma3_text"])
def test_drafters_receive_target_hidden_states_of_committed_positions(arch):
    model = tiny_model(arch)
    with torch.no_grad():  # non-trivial final norm, so a normed state cannot pass for a raw one
        for p in model.model.norm.parameters():
            p.normal_(generator=torch.Generator().manual_seed(0))
    runner = make_runner(model)
    ids = prompt(6)
    drafter = HiddenRecorder()
    res = speculative_generate(runner, drafter, ids, StopRule(30))
    full = torch.cat([ids, torch.tensor(res.tokens)])
    ref = model(full[None], output_hidden_states=True)
    got = torch.cat(drafter.rows[1])
    n = got.shape[0]  # committed positions, in order, from the start
    torch.testing.assert_close(got, ref.hidden_states[1][0, :n], atol=1e-4, rtol=1e-4)
    final = torch.cat(drafter.rows[FINAL])
    torch.testing.assert_close(model.get_output_embeddings()(final), ref.logits[0, :n], atol=1e-3, rtol=1e-3)


def test_fixed_rows_make_each_row_independent_of_its_step():
    """bf16 logits of a token must not depend on which row of which step computed it."""
    from draftsmith.engine.lean_llama import LeanLlamaRunner

    model = tiny_model("llama", hidden=256).to(torch.bfloat16)
    ids = prompt(n=60)
    runner = LeanLlamaRunner(model, dual=True)
    runner.set_fixed_rows(4)
    runner.reset(80)
    runner.forward(ids[:20], n_logits=0)
    one_by_one = torch.cat([runner.forward(ids[i : i + 1]).logits for i in range(20, 60)])
    for sizes in ([4, 3, 1, 2, 4, 4, 3, 4, 4, 3, 4, 4], [2, 4, 3, 4, 4, 3, 4, 4, 4, 4, 4]):
        runner.rollback(20)
        parts, at = [], 20
        for n in sizes:
            parts.append(runner.forward(ids[at : at + n], n_logits=n).logits)
            at += n
        assert at == 60
        assert torch.equal(torch.cat(parts), one_by_one), sizes
    # across the 512-key window boundary: steps ending on either side must agree bit for bit
    long_ids = prompt(n=540)
    runner.reset(560)
    runner.forward(long_ids[:500], n_logits=0)
    one_by_one = torch.cat([runner.forward(long_ids[i : i + 1]).logits for i in range(500, 540)])
    runner.rollback(500)
    parts, at = [], 500
    for n in [3, 4, 2, 4, 4, 1, 4, 3, 4, 4, 3, 4]:
        parts.append(runner.forward(long_ids[at : at + n], n_logits=n).logits)
        at += n
    assert at == 540 and torch.equal(torch.cat(parts), one_by_one)


def test_fixed_rows_keep_every_method_identical_in_bf16():
    model = tiny_model("llama", hidden=256).to(torch.bfloat16)
    runner = make_runner(model)
    runner.set_fixed_rows(4)
    draft = perturbed_copy(model, 0.05).to(torch.bfloat16)
    for seed in range(2):
        ids = prompt(seed)
        expected = speculative_generate(runner, PlainDrafter(), ids, StopRule(40)).tokens
        for drafter in (NgramDrafter(k=5, max_ngram=3), DraftModelDrafter(draft, VOCAB, k=6)):
            res = speculative_generate(runner, drafter, ids, StopRule(40))
            assert res.tokens == expected, (drafter.name, seed)
            assert res.stats.drafted > 0 or drafter.name == "ngram"
            assert len(res.stats.drafted_at) <= 3, "drafts must fit the fixed step"


def test_fixed_rows_flatten_the_cost_table_and_turning_them_off_restores_it():
    runner = make_runner(tiny_model("llama"))
    runner.measured_cost = {1: 1.0, 2: 1.5, 3: 1.6, 4: 1.7, 5: 2.5}
    runner.set_fixed_rows(4)
    assert runner.step_cost == {1: 1.7, 2: 1.7, 3: 1.7, 4: 1.7}
    runner.set_fixed_rows(0)
    assert runner.step_cost == runner.measured_cost
    for bad in (1, 17, -1, 2.0, "4", True):
        with pytest.raises(DraftsmithError, match="fixed rows"):
            runner.set_fixed_rows(bad)
