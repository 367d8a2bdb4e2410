"""The bench's round-cost summary: drafting and verification per round, and the speedup the same
acceptance would give if drafting cost nothing (the measure that tells acceptance from drafting cost)."""

from draftsmith.engine.stats import GenerationStats
from draftsmith.evaluation.bench import RunRecord, round_cost_table, summarise


def _record(method: str, prompt: str, rep: int, seconds: float, rounds: int, draft_s: float) -> RunRecord:
    stats = GenerationStats(
        new_tokens=8, rounds=rounds, produced=8, draft_s=draft_s, verify_s=seconds - draft_s
    )
    return RunRecord("s", prompt, method, rep, [1] * 8, seconds, stats)


def test_round_costs_and_the_free_drafting_speedup_come_from_the_measured_times():
    records = []
    for rep, slow in ((0, 1.0), (1, 1.2)):  # a second repeat on a slower machine: medians over both
        for prompt in ("a", "b"):
            records.append(_record("plain", prompt, rep, 8.0 * slow, 8, 0.0))
            # 4 rounds of 1.0 s (0.25 s drafting) a prompt: plain 8 s against 4 s, 3 s without drafting
            records.append(_record("dspark", prompt, rep, 4.0 * slow, 4, 1.0 * slow))
    rows = {s.method: s for s in summarise(records, ["plain", "dspark"], ["s"], 2, greedy=True)}
    ours = rows["dspark"]
    assert ours.speedup_median == 2.0
    assert abs(ours.speedup_free_drafting - 8 / 3) < 1e-3
    assert ours.rounds == 16 and abs(ours.draft_ms - 275.0) < 1e-6 and abs(ours.verify_ms - 825.0) < 1e-6
    assert rows["plain"].speedup_free_drafting is None  # the baseline has nothing to take out
    table = round_cost_table(list(rows.values()))
    assert "| s | dspark | 16 | 275.00 | 825.00 | 25% | 2.00x | 2.67x |" in table
    assert "| s | plain | 32 | 0.00 | 1100.00 | 0% | 1.00x | - |" in table


def test_no_round_cost_table_without_engine_runs():
    """Methods run outside the engine (transformers' own generate) have no rounds to report."""
    records = [
        RunRecord("s", "a", "plain", 0, [1], 1.0, None),
        RunRecord("s", "a", "hf-plain", 0, [1], 1.0, None),
    ]
    rows = summarise(records, ["plain", "hf-plain"], ["s"], 1, greedy=True)
    assert all(s.speedup_free_drafting is None and s.rounds is None for s in rows)
    assert round_cost_table(rows) == ""


def test_the_bench_says_when_its_numbers_are_noisy():
    """One repeat, a tok/s spread wider than 10% of its median over the repeats, or other processes
    busy on the cores: each gets a line, so a bare speedup is never the whole story."""
    from draftsmith.evaluation.bench import BenchResult, noise_notes

    records = []
    for rep, slow in ((0, 1.0), (1, 1.3)):  # the second repeat of dspark ran 30% slower
        for prompt in ("a", "b"):
            records.append(_record("plain", prompt, rep, 8.0, 8, 0.0))
            records.append(_record("dspark", prompt, rep, 4.0 * slow, 4, 1.0))
    summaries = summarise(records, ["plain", "dspark"], ["s"], 2, greedy=True)
    quiet = BenchResult({"repeats_done": 2, "other_load": 0.01}, {}, summaries, records)
    (note,) = noise_notes(quiet)
    assert note.startswith("s dspark: tok/s ranged 1.5-2.0 over the repeats") and "noisy" in note
    busy = BenchResult({"repeats_done": 2, "other_load": 0.45}, {}, summaries[:1], records)
    assert noise_notes(busy) == [
        "other processes used 45% of the CPU while this bench ran: every timing here is suspect; rerun on "
        "an idle machine"
    ]
    once = BenchResult({"repeats_done": 1, "other_load": None}, {}, summaries[:1], records)
    assert noise_notes(once)[0].startswith("one repeat")
