"""Sampling: parameter validation, the target distribution, and statistical losslessness.

The exact distribution of the first three generated tokens is enumerated from a tiny model, and
speculative samples are tested against it with a chi-square goodness-of-fit test. A deliberately
wrong verifier (resampling from p instead of the residual after a rejection) must fail the same test.
"""

from __future__ import annotations

import itertools

import pytest
import torch
from conftest import tiny_model
from scipy.stats import chisquare

from draftsmith.drafters.draft_model import DraftModelDrafter
from draftsmith.drafters.ngram import NgramDrafter
from draftsmith.drafters.plain import PlainDrafter
from draftsmith.engine.backends import make_runner
from draftsmith.engine.batch_sampler import BatchSampler
from draftsmith.engine.decode import StopRule, speculative_generate
from draftsmith.engine.sampling import SamplingParams, sample, sample_logits, target_probs
from draftsmith.engine.verify import verify_sampling
from draftsmith.errors import DraftsmithError

V = 6
N_NEW = 3


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(temperature=-1),
        dict(temperature=float("nan")),
        dict(top_p=0),
        dict(top_p=1.5),
        dict(top_k=-1),
        dict(top_k=2.5),
        dict(seed="x"),
    ],
)
def test_invalid_sampling_values_are_rejected(kwargs):
    with pytest.raises(DraftsmithError):
        SamplingParams(**kwargs)


def test_target_probs_applies_top_k_and_top_p():
    logits = torch.tensor([[2.0, 1.0, 0.5, 0.0, -1.0]])
    p = target_probs(logits, SamplingParams(temperature=1.0, top_k=2))
    assert (p[0, 2:] == 0).all() and torch.isclose(p.sum(), torch.tensor(1.0))
    full = torch.softmax(logits, -1)[0]
    p = target_probs(logits, SamplingParams(temperature=1.0, top_p=0.7))
    kept = (p[0] > 0).sum().item()
    assert full[: kept - 1].sum() < 0.7 <= full[:kept].sum()  # smallest prefix reaching top_p
    greedy = target_probs(logits, SamplingParams())
    assert greedy[0].tolist() == [1.0, 0.0, 0.0, 0.0, 0.0]


def wrong_verifier(logits, draft, draft_probs, params, generator):
    """Accepts like speculative sampling but resamples from p, not the residual: biased."""
    n, _ = verify_sampling(logits, draft, draft_probs, params, generator)
    p = target_probs(logits, params)
    return n, int(sample(p[n], generator))


@pytest.fixture(scope="module")
def setup():
    target = tiny_model("llama", seed=3, vocab=V, hidden=32)
    draft = tiny_model("llama", seed=4, vocab=V, hidden=32)
    params = SamplingParams(temperature=1.3, top_k=5)
    ids = torch.tensor([1, 4, 3, 4, 5, 3, 4])
    # exact P(t1, t2, t3) by enumeration
    seqs = list(itertools.product(range(V), repeat=N_NEW))
    batch = torch.stack([torch.cat([ids, torch.tensor(s)]) for s in seqs])
    with torch.no_grad():
        probs = target_probs(target(batch).logits[:, len(ids) - 1 : -1], params)
    exact = torch.ones(len(seqs))
    for j in range(N_NEW):
        exact *= probs[torch.arange(len(seqs)), j, torch.tensor([s[j] for s in seqs])]
    return target, draft, params, ids, seqs, exact


def sample_counts(setup, drafter, n, verifier=None):
    target, _, params, ids, seqs, _ = setup
    runner = make_runner(target)
    index = {s: i for i, s in enumerate(seqs)}
    counts = torch.zeros(len(seqs))
    extra = {} if verifier is None else {"verifier": verifier}
    for i in range(n):
        p = SamplingParams(temperature=params.temperature, top_k=params.top_k, seed=i)
        res = speculative_generate(runner, drafter, ids, StopRule(N_NEW), p, **extra)
        counts[index[tuple(res.tokens)]] += 1
    return counts


def gof_pvalue(counts, exact):
    n = counts.sum()
    expected = exact / exact.sum() * n
    big = expected >= 5  # pool the rare cells so the chi-square approximation holds
    obs = torch.cat([counts[big], counts[~big].sum().reshape(1)])
    exp = torch.cat([expected[big], expected[~big].sum().reshape(1)])
    return chisquare(obs.numpy(), exp.numpy()).pvalue


N_SAMPLES = 3000


@pytest.mark.slow  # thousands of sampled decodes: a goodness-of-fit test
def test_plain_sampling_matches_exact_distribution(setup):
    assert gof_pvalue(sample_counts(setup, PlainDrafter(), N_SAMPLES), setup[-1]) > 1e-3


@pytest.mark.slow  # thousands of sampled decodes: a goodness-of-fit test
def test_speculative_sampling_with_draft_model_is_lossless(setup):
    drafter = DraftModelDrafter(setup[1], V, k=2)
    assert gof_pvalue(sample_counts(setup, drafter, N_SAMPLES), setup[-1]) > 1e-3


@pytest.mark.slow  # thousands of sampled decodes: a goodness-of-fit test
def test_speculative_sampling_with_deterministic_drafter_is_lossless(setup):
    drafter = NgramDrafter(k=2, max_ngram=2)
    assert gof_pvalue(sample_counts(setup, drafter, N_SAMPLES), setup[-1]) > 1e-3


@pytest.mark.slow  # thousands of sampled decodes: a goodness-of-fit test
def test_wrong_verifier_is_detected(setup):
    drafter = DraftModelDrafter(setup[1], V, k=2)
    counts = sample_counts(setup, drafter, N_SAMPLES, verifier=wrong_verifier)
    assert gof_pvalue(counts, setup[-1]) < 1e-6


@pytest.mark.slow  # thousands of sampled decodes: a goodness-of-fit test
def test_batch_sampler_matches_exact_distribution(setup):
    """Continuous batching (slots refilled as sequences end) draws from the same distribution."""
    target, _, params, ids, seqs, exact = setup
    sampler = BatchSampler(make_runner(target), slots=32, capacity=len(ids) + N_NEW)
    index = {s: i for i, s in enumerate(seqs)}
    counts = torch.zeros(len(seqs))
    seeded = SamplingParams(temperature=params.temperature, top_k=params.top_k, seed=0)
    for done in sampler.generate([ids.tolist()] * N_SAMPLES, N_NEW, seeded, frozenset()):
        counts[index[tuple(done.tokens)]] += 1
    assert counts.sum() == N_SAMPLES
    assert gof_pvalue(counts, exact) > 1e-3


@pytest.mark.parametrize("top_k,top_p", [(3, 1.0), (4, 0.6), (0, 0.8), (2, 0.3)])
def test_sample_logits_and_fast_top_k_match_the_reference_distribution(top_k, top_p):
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(4, 12, generator=g) * 2
    logits[3, :3] = 5.0  # a three-way tie at the top: the exact (tie-keeping) path
    params = SamplingParams(temperature=0.9, top_p=top_p, top_k=top_k, seed=1)
    # the reference: mask the whole vocabulary, softmax, nucleus
    ref = logits / params.temperature
    if top_k:
        ref = ref.masked_fill(ref < torch.topk(ref, top_k, -1).values[:, -1:], float("-inf"))
    ref = torch.softmax(ref, -1)
    sorted_p, idx = torch.sort(ref, dim=-1, descending=True, stable=True)  # ties: lowest id first
    drop = torch.zeros_like(ref, dtype=torch.bool).scatter(-1, idx, (sorted_p.cumsum(-1) - sorted_p) >= top_p)
    ref = ref.masked_fill(drop, 0.0)
    ref = ref / ref.sum(-1, keepdim=True)
    assert torch.allclose(target_probs(logits, params), ref, atol=1e-6)
    gen = params.generator()
    draws = torch.stack([sample_logits(logits, params, gen) for _ in range(4000)])  # [4000, 4]
    for row in range(4):
        counts = torch.bincount(draws[:, row], minlength=12).float()
        assert (counts[ref[row] == 0] == 0).all()  # never a token outside top-k / top-p
        keep = ref[row] > 0
        if keep.sum() > 1:
            assert chisquare(counts[keep].numpy(), (ref[row, keep] * 4000).numpy()).pvalue > 1e-3


def test_top_k_keeps_every_bf16_tie_with_the_kth_logit():
    """bf16 logits tie often; tokens tying with the k-th stay candidates, as in target_probs."""
    logits = torch.full((2, 200), -4.0)
    logits[:, :2] = 3.0
    logits[:, 10:16] = 2.0  # six-way tie at the 3rd place: all six stay with top_k=3
    logits[1, 100:190] = 2.0  # more ties than the candidate room: the full-vocabulary path
    logits = logits.to(torch.bfloat16)
    params = SamplingParams(temperature=1.0, top_k=3, seed=0)
    gen = params.generator()
    draws = torch.stack([sample_logits(logits, params, gen) for _ in range(3000)])
    ref = target_probs(logits, params)
    for row in range(2):
        freq = torch.bincount(draws[:, row], minlength=200).float() / 3000
        assert (freq[ref[row] == 0] == 0).all()
        assert torch.allclose(freq, ref[row], atol=0.03)
