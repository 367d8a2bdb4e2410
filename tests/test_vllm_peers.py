"""The vLLM peers' launch settings (no vLLM needed): each peer's --speculative-config, as EXPORT.md's
launch lines give it."""

from __future__ import annotations

import pytest

from draftsmith.evaluation.vllm_peers import PeerUnavailable, speculative_config


def test_each_peer_has_the_speculative_config_of_its_launch_line():
    assert speculative_config("vllm-plain", None, {}) is None
    ngram = speculative_config("vllm-ngram", None, {}, k=5)
    assert ngram == {
        "method": "ngram",
        "num_speculative_tokens": 5,
        "prompt_lookup_min": 1,
        "prompt_lookup_max": 3,
    }


def test_a_draft_model_peer_without_a_draft_model_is_skipped_with_its_reason():
    with pytest.raises(PeerUnavailable, match=r"--drafter distilled=DIR"):
        speculative_config("vllm-draft-model", None, {})
