"""Issue 8, session 31: the prob rule drafting the history length (+0) instead of the history length + 1.

The engine (as of this A/B) asks a prob-rule drafter for the history rule's length + 1 slots, then
cuts by probability; `cap_offset_sim.py` replays +0 ahead of +1 by 0.000-0.019x. This registers
`dspark-cap0`, the shipped DSpark drafting one slot fewer than asked on every round but the full-block
ones (the engine asks k < the block only when it capped), and runs `draftsmith bench` with the
arguments given, e.g.
  python docs/results/session31/cap0_ab.py bench --methods plain,dspark,dspark-cap0 \
    --drafter dspark-cap0=draftsmith/drafters/pretrained/smollm2-dspark ...
"""

import sys

from draftsmith.cli import main
from draftsmith.drafters.base import Draft
from draftsmith.drafters.dflash.drafter import DSparkDrafter
from draftsmith.drafters.registry import METHODS


class Cap0DSpark(DSparkDrafter):
    name = "dspark"  # the checkpoint check reads it; the registry key names the variant

    def propose(self, tokens, k, params, generator):
        if 0 < k < self.default_k:
            k -= 1
        if k == 0:  # the history rule said draft nothing: keep the context cache in step, draft nothing
            self.flush([self])
            self.confidences, self.confidence_logits, self.token_probs = [], [], []
            return Draft.empty(tokens.device)
        return super().propose(tokens, k, params, generator)


METHODS["dspark-cap0"] = Cap0DSpark
sys.exit(main(sys.argv[1:]))
