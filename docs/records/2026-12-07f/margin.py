import sys, torch
sys.path.insert(0, "/work/main/tests")
from pathlib import Path
from draftsmith.api import load_target
from draftsmith.drafters.dspark.drafter import DSparkDrafter
from draftsmith.drafters.dflash.drafter import DFlashDecodeOptions
from draftsmith.engine.decode import speculative_generate
W = Path(sys.argv[1]); theirs = [int(x) for x in sys.argv[2].split(",")]
t = load_target(str(W / "target"), dtype="float32")
ids = t.encode("Write a Python function that reverses a list.")
seen = {}
class Rec(DSparkDrafter):
    def _walk_one(self, states, tokens, params, generator):
        if len(tokens) == len(ids) + 1 and "s" not in seen:
            m = self.model
            base = m.base_logits(states).float()
            prev = m.prev_index(tokens[-1:])
            out = []
            for s, want in enumerate(theirs):
                lg = base[s] + m.markov_bias(prev).float()[0]
                p = torch.softmax(lg, -1)
                top = p.topk(3)
                out.append((top.indices.tolist(), [round(x, 4) for x in top.values.tolist()], "theirs", want, round(float(p[want]), 4)))
                prev = m.prev_index(torch.tensor([theirs[s]]))  # follow their chain
            seen["s"] = out
        return super()._walk_one(states, tokens, params, generator)
d = Rec.build(t, DFlashDecodeOptions(drafter=str(W / "dspark")))
speculative_generate(t.runner, d, ids, t.stop_rule(8), k=3, adaptive=False)
for row in seen["s"]: print(row)
