import sys, json, torch
from pathlib import Path
from draftsmith.api import load_target
from draftsmith.drafters.registry import METHODS
from draftsmith.evaluation import first_drafts as fd
from draftsmith.evaluation.llamacpp_peers import engine_variant
from draftsmith.export.gguf import write_target
from draftsmith.export.methods import export_directory
tdir, builds, which = sys.argv[1], Path(sys.argv[2]), sys.argv[3].split(",")
target = load_target(tdir, dtype="float32")
P = ["Write a Python function that adds two numbers.", "Name three colours.", "What is 12 times 7?", "Why is the sky blue?"]
prompts = [target.encode(p) for p in P]
work = builds / "agree"; work.mkdir(exist_ok=True)
tg = write_target(target, work, "f32")
for m in sys.argv[4].split(","):
    src = builds / f"b-{m}" / "drafter"
    lookup, cut = engine_variant(m, src)
    opts = METHODS[m].options(drafter=str(src), lookup=lookup, draft_vocab=cut or 0) if m != "eagle3" else METHODS[m].options(drafter=str(src))
    import json as J
    c = J.load(open(src/"config.json")); k = c["block_size"] - (not c["sample_from_anchor"]) if m != "eagle3" else 3
    with torch.no_grad():
        ours = [fd.ours(target, m, ids, k=k, options=opts) for ids in prompts]
    print(m, "ours", [(o.token, o.drafts, [round(p,3) for p in o.probs]) for o in ours], flush=True)
    if "llamacpp" in which:
        g, _ = export_directory(src, "gguf", work / f"{m}-gguf", target, None, gguf_type="f32", lookup=lookup, draft_vocab=cut)
        th = fd.in_llamacpp(tg, g, m, prompts, work / f"{m}-llama.log", drafter_dir=src, k=k)
        print(m, "llamacpp", [(o.token, o.drafts) for o in th], flush=True)
    if "vllm" in which and m != "dspark":
        d, _ = export_directory(src, "speculators", work / f"{m}-spec", target, None, lookup=lookup, draft_vocab=cut)
        th = fd.in_vllm(str(Path(tdir).resolve()), {"method": m, "model": str(d), "num_speculative_tokens": k}, prompts, work / f"{m}-vllm.log")
        print(m, "vllm", [(o.token, o.drafts) for o in th], flush=True)
