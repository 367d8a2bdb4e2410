"""Lossless under sampling, for every drafter that computes its own draft probabilities.

DFlash, DSpark (with and without its lookup input, with a cut draft vocabulary), the hybrid (lookup
drafts and DSpark drafts in one decode), EAGLE-3 (a reduced draft vocabulary), MTP and Medusa each
sample their drafts from their own distribution q, which the verifier must use exactly. The first
three tokens they generate, over thousands of seeds, must follow the target's exact distribution
(enumerated from a tiny model, a chi-square goodness-of-fit test as tests/test_sampling.py does for
the others), and a verifier that resamples from p instead of the residual after a rejection must fail
the same test with the same drafter: the test can tell a biased decode from an exact one for each."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from conftest import IdTokenizer, tiny_model
from test_dflash import make_drafter
from test_sampling import gof_pvalue, wrong_verifier

from draftsmith.drafters.dflash.drafter import DFlashDecodeOptions, DFlashDrafter
from draftsmith.drafters.dflash.model import DFlashModel
from draftsmith.drafters.dspark.drafter import DSparkDrafter
from draftsmith.drafters.eagle3.config import Eagle3Config
from draftsmith.drafters.eagle3.drafter import Eagle3Drafter
from draftsmith.drafters.eagle3.model import Eagle3Model
from draftsmith.drafters.hybrid import HybridDecodeOptions, HybridDrafter
from draftsmith.drafters.medusa.drafter import MedusaDrafter
from draftsmith.drafters.medusa.recipe import MedusaOptions, MedusaRecipe
from draftsmith.drafters.mtp.checkpoint import ready_for
from draftsmith.drafters.mtp.drafter import MTPDrafter
from draftsmith.drafters.mtp.recipe import MTPOptions, MTPRecipe
from draftsmith.drafters.options import TrainedDecodeOptions
from draftsmith.engine.decode import StopRule, speculative_generate
from draftsmith.engine.sampling import SamplingParams, target_probs
from draftsmith.models.target import Target

V = 6
N_NEW = 3
N_SAMPLES = 2000
PARAMS = SamplingParams(temperature=1.3, top_k=5)
PROMPT = torch.tensor([1, 4, 3, 4, 5, 3, 4, 3, 4])  # ends in a repeat: the hybrid's lookup drafts too


@pytest.fixture(scope="module")
def setup():
    target = Target(tiny_model("llama", seed=3, vocab=V, hidden=32, layers=4), IdTokenizer(V), name="tiny-v6")
    seqs = list(itertools.product(range(V), repeat=N_NEW))
    batch = torch.stack([torch.cat([PROMPT, torch.tensor(s)]) for s in seqs])
    with torch.no_grad():
        probs = target_probs(target.model(batch).logits[:, len(PROMPT) - 1 : -1], PARAMS)
    exact = torch.ones(len(seqs))
    for j in range(N_NEW):
        exact *= probs[torch.arange(len(seqs)), j, torch.tensor([s[j] for s in seqs])]
    return target, seqs, exact


def block_model(target: Target, dspark: bool, lookup_input: int = 0) -> DFlashModel:
    """A random DFlash / DSpark drafter over the tiny target (tests/test_dflash.py's), with a live
    Markov bias, and token counts for a cut."""
    model = make_drafter(target, dspark, lookup_input=lookup_input)
    if dspark:
        with torch.no_grad():  # a live Markov bias (it starts at zero)
            model.markov_out.weight.normal_(0.0, 1.0, generator=torch.Generator().manual_seed(6))
    model.token_counts = np.array([1, 9, 2, 8, 7, 3])  # the cut keeps tokens 1, 3, 4 (and 5)
    return model.eval()


def build(name: str, target: Target):
    if name == "dflash":
        return DFlashDrafter.build(target, DFlashDecodeOptions(drafter=block_model(target, False)))
    if name == "dspark":
        return DSparkDrafter.build(target, DFlashDecodeOptions(drafter=block_model(target, True)))
    if name == "dspark-lookup":
        return DSparkDrafter.build(target, DFlashDecodeOptions(drafter=block_model(target, True, 3)))
    if name == "dspark-no-lookup":
        options = DFlashDecodeOptions(drafter=block_model(target, True, 3), lookup=False)
        return DSparkDrafter.build(target, options)
    if name == "dspark-cut":  # FR-Spec: the draft distribution misses two tokens entirely
        return DSparkDrafter.build(
            target, DFlashDecodeOptions(drafter=block_model(target, True), draft_vocab=4)
        )
    if name == "hybrid":
        options = HybridDecodeOptions(drafter=block_model(target, True), ngram_min=2, ngram_max=3)
        return HybridDrafter.build(target, options)
    if name == "eagle3":  # a reduced draft vocabulary: the draft distribution misses two tokens
        cfg = Eagle3Config(
            hidden_size=32, num_heads=4, num_kv_heads=2, head_dim=8, intermediate_size=64,
            target_hidden_size=32, target_layers=[1, 2, 3], target_vocab_size=V, draft_vocab_size=4,
        )  # fmt: skip
        eagle = Eagle3Model(cfg)
        eagle.init_weights(1)
        eagle.set_draft_vocab(torch.tensor([1, 2, 3, 4]))
        eagle.attach_target(target.model.get_input_embeddings().weight)
        return Eagle3Drafter(eagle.eval(), V, k=2)
    if name == "mtp":
        torch.manual_seed(0)
        return MTPDrafter.build(
            target,
            TrainedDecodeOptions(
                drafter=ready_for(MTPRecipe().build(target, MTPOptions(), [1], None), target)
            ),
        )
    if name == "medusa":
        torch.manual_seed(0)
        model = MedusaRecipe().build(target, MedusaOptions(), [1], None)
        for p in model.parameters():  # off the zero init, so the heads disagree with the target
            torch.nn.init.normal_(p, std=0.5)
        return MedusaDrafter.build(target, TrainedDecodeOptions(drafter=model.eval()))
    raise AssertionError(name)


def sample_counts(target: Target, seqs, drafter, verifier=None) -> tuple[torch.Tensor, int, int]:
    """Counts of each 3-token continuation over N_SAMPLES seeds, and the tokens drafted / accepted."""
    index = {s: i for i, s in enumerate(seqs)}
    counts = torch.zeros(len(seqs))
    extra = {} if verifier is None else {"verifier": verifier}
    drafted = accepted = 0
    for i in range(N_SAMPLES):
        p = SamplingParams(temperature=PARAMS.temperature, top_k=PARAMS.top_k, seed=i)
        res = speculative_generate(
            target.runner, drafter, PROMPT, StopRule(N_NEW), p, k=2, adaptive=False, **extra
        )
        counts[index[tuple(res.tokens)]] += 1
        drafted += res.stats.drafted
        accepted += res.stats.accepted
    return counts, drafted, accepted


DRAFTERS = [
    "dflash", "dspark", "dspark-lookup", "dspark-no-lookup", "dspark-cut", "hybrid", "eagle3", "mtp", "medusa"
]  # fmt: skip


@pytest.mark.slow  # thousands of sampled decodes per drafter: a goodness-of-fit test
@pytest.mark.parametrize("name", DRAFTERS)
def test_sampled_decoding_follows_the_targets_exact_distribution(setup, name):
    target, seqs, exact = setup
    counts, drafted, accepted = sample_counts(target, seqs, build(name, target))
    assert drafted > N_SAMPLES and 0 < accepted < drafted  # it drafts, and some drafts are rejected
    assert gof_pvalue(counts, exact) > 1e-3
    biased, _, _ = sample_counts(target, seqs, build(name, target), verifier=wrong_verifier)
    assert gof_pvalue(biased, exact) < 1e-6  # the same test catches a biased verifier with this drafter
