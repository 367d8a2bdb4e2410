"""Scratch: a tiny random Qwen3 target through regenerate -> cache -> train -> export -> llama.cpp."""
import json, sys, time, torch
from pathlib import Path
sys.path.insert(0, "/work/main/tests")
from transformers import AutoConfig, AutoModelForCausalLM
from draftsmith.api import load_target
from draftsmith.training.regenerate import RegenConfig, local_engine, regenerate
from draftsmith.training.cache import build_cache, TargetCache
from draftsmith.training.train import TrainConfig, train
from draftsmith.drafters.dflash.config import default_target_layers
from draftsmith.export.methods import export_directory
from draftsmith.export.gguf import write_target
from test_llamacpp import our_first_drafts, llamacpp_first_drafts

W = Path("/work/main/scratch/qwen3/w"); W.mkdir(parents=True, exist_ok=True)
t0 = time.time()
default = load_target(None)
if not (W / "target" / "config.json").is_file():
    torch.manual_seed(0)
    cfg = AutoConfig.for_model("qwen3", vocab_size=default.runner.vocab_size, hidden_size=256, intermediate_size=512,
        num_hidden_layers=8, num_attention_heads=4, num_key_value_heads=2, head_dim=64, max_position_embeddings=2048,
        tie_word_embeddings=True, bos_token_id=default.tokenizer.bos_token_id, eos_token_id=default.tokenizer.eos_token_id)
    m = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    m.save_pretrained(W / "target"); default.tokenizer.save_pretrained(W / "target")
target = load_target(str(W / "target"), dtype="float32")
print("target", type(target.model).__name__, time.time() - t0, flush=True)
prompts = W / "prompts.jsonl"
prompts.write_text("".join(json.dumps({"id": str(i), "prompt": p}) + "\n" for i, p in enumerate(
    ["Write a Python function that reverses a list.", "What is 12 times 7?", "Name three colours.", "Explain recursion briefly.",
     "def add(a, b):", "List the planets.", "Translate 'hello' to French.", "What is a prime number?"])))
answers = W / "answers.jsonl"
regenerate(prompts, answers, local_engine(target, RegenConfig(max_new_tokens=48, temperature=1.0, top_p=1.0, top_k=0, batch=8)))
layers = default_target_layers(target.runner.num_layers)
build_cache(target, answers, W / "cache", layers, progress=False)
cache = TargetCache(W / "cache", target)
print("cache", len(cache), time.time() - t0, flush=True)
for method in ("dspark", "dflash", "eagle3"):
    out = W / method
    if not (out / "model.safetensors").is_file():
        cfg = TrainConfig.from_flat(method=method, steps=4, batch=2, held_out=1, eval_every=4, save_every=4,
                                    **({"anchors": 8} if method != "eagle3" else {}))
        train(target, cache, cfg, out, progress=False)
    print("trained", method, time.time() - t0, flush=True)
tg = write_target(target, W / "gguf", "f32")
print("target gguf", tg, time.time() - t0, flush=True)
ids = [target.encode(p) for p in ["Write a Python function that reverses a list.", "What is 12 times 7?"]]
for method in ("dspark", "dflash", "eagle3"):
    g, _ = export_directory(W / method, "gguf", W / f"gguf-{method}", target, None, gguf_type="f32")
    with torch.no_grad():
        from draftsmith.drafters.registry import METHODS
        whole = {"draft_vocab": 0} if method != "eagle3" else {}  # the GGUF keeps every token: no cut here either
        ours = [our_first_drafts(target, method, x, options=METHODS[method].options(drafter=str(W / method), **whole)) for x in ids]
    theirs = llamacpp_first_drafts(tg, g, method, ids, W / f"{method}.log", drafter_dir=W / method)
    print(method, "ours", ours, "theirs", theirs, time.time() - t0, flush=True)
