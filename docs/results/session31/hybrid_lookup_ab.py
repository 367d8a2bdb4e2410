"""Issue 8, session 31: should the hybrid's lookup rounds be cut like its DSpark rounds?

Under the prob rule the hybrid's DSpark rounds are cut by DSpark's token probabilities, while its
lookup rounds (a suffix match of 3+ tokens) have none and are cut to the history rule's length. This
registers `hybrid-uncut`, the same hybrid whose lookup drafts count as sure (probability 1: every
drafted lookup token is verified, up to the history length + 1 the engine asks for), and runs
`draftsmith bench` with the arguments given, e.g.
  python docs/results/session31/hybrid_lookup_ab.py --methods plain,hybrid,hybrid-uncut \
    --drafter hybrid-uncut=draftsmith/drafters/pretrained/smollm2-dspark --suite humaneval,gsm ...
"""

import sys

from draftsmith.cli import main
from draftsmith.drafters.hybrid import HybridDrafter
from draftsmith.drafters.registry import METHODS


class UncutLookupHybrid(HybridDrafter):
    name = "hybrid-uncut"

    @property
    def token_probs(self) -> list[float]:
        return self.learned.token_probs if self.source == "dspark" else [1.0] * self.learned.default_k


METHODS["hybrid-uncut"] = UncutLookupHybrid
sys.exit(main(sys.argv[1:]))
