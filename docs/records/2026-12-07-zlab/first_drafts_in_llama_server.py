import sys, torch
from pathlib import Path
sys.path.insert(0, "tests")
from test_llamacpp import our_first_drafts, llamacpp_first_drafts, PROMPTS
from draftsmith.api import load_target
from draftsmith.export import verifier_of, export_drafter
from draftsmith.export.gguf import target_gguf, write
from draftsmith.drafters.dflash.checkpoint import load_drafter
from draftsmith.drafters.registry import METHODS
import draftsmith.drafters.checkpoint as ck

t = load_target(None)
src = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("scratch/recipe-smoke/zl-test")
out = Path("scratch/zl-gguf"); out.mkdir(exist_ok=True)
m = load_drafter(src, t)
export_drafter(m, "zlab", out / "zlab", verifier_of(t)); print("zlab export ok")
g = write(src, "dflash", out / "gguf", t, verifier_of(t)); print("gguf", g)
prompts = [t.encode(p) for p in PROMPTS]
# ours: use the converted drafter via a patched shipped lookup
ck.shipped_drafter = lambda method, target: src
import draftsmith.drafters.dflash.drafter as dd; dd.shipped_drafter = lambda method, target: src
with torch.no_grad():
    ours = [our_first_drafts(t, "dflash", ids) for ids in prompts]
theirs = llamacpp_first_drafts(target_gguf(t), g, "dflash", prompts, out / "server.log", src)
print("ours", ours); print("theirs", theirs)
