"""What every drafter checkpoint shares: the fingerprint of the target it was trained for."""

from __future__ import annotations

import hashlib
import json


def target_fingerprint(target) -> str:
    """Vocabulary + the architecture facts a drafter depends on (width, depth, vocab size)."""
    cfg = target.model.config
    arch = [cfg.model_type, cfg.hidden_size, cfg.num_hidden_layers, target.runner.vocab_size]
    return hashlib.sha1(json.dumps([target.vocab_fingerprint(), arch]).encode()).hexdigest()[:16]
