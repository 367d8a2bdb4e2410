"""Where does llama-server's speculative round time go beyond llama-bench's T(1+d) + drafting?"""
import json, sys
from pathlib import Path
from draftsmith.api import load_target
from draftsmith.evaluation.llamacpp_peers import LlamaServerPeer, peer_args
from draftsmith.export.gguf import target_gguf, write_target
from draftsmith.paths import data_dir
from draftsmith.evaluation.suites import load_suite

target = load_target(dtype="float32")
model = target_gguf(target) or write_target(target, data_dir() / "gguf")
eos = target.eos_ids
prompts = [target.encode(p.text, chat=p.chat) for p in load_suite("humaneval", 4)]
rep = target.encode("Repeat this list exactly, twice: " + " ".join(f"item{i}" for i in range(60)) + "\n" + " ".join(f"item{i}" for i in range(60)), chat=True)
out = {}
configs = {
    "plain-lv4": [],
    "plain-lv1": ["-lv", "1"],
    "ngram-rep-lv4": peer_args("llamacpp-ngram", target, {}),
    "ngram-rep-lv1": peer_args("llamacpp-ngram", target, {}) + ["-lv", "1"],
    "dspark-lv4": peer_args("llamacpp-dspark", target, {}),
    "dspark-lv1": peer_args("llamacpp-dspark", target, {}) + ["-lv", "1"],
}
log = Path("scratch/llama-overhead"); 
for name, args in configs.items():
    peer = LlamaServerPeer("llamacpp-x" if "plain" not in name else "llamacpp-plain", args, model, 2, log / f"{name}.log", eos)
    try:
        rows = []
        for rep_i in range(2):
            for ids in ([rep] if "rep" in name else prompts):
                import urllib.request
                body = {"prompt": ids, "n_predict": 128, "temperature": 0.0, "top_k": 1, "cache_prompt": False, "stream": False}
                req = urllib.request.Request(f"http://127.0.0.1:{peer.port}/completion", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
                t = json.loads(urllib.request.urlopen(req, timeout=600).read())["timings"]
                rows.append(t)
        pn = sum(t["predicted_n"] for t in rows); pms = sum(t["predicted_ms"] for t in rows)
        dn = sum(t.get("draft_n", 0) for t in rows); da = sum(t.get("draft_n_accepted", 0) for t in rows)
        rounds = pn - da
        res = dict(tokens=pn, ms=pms, rounds=rounds, drafts_per_round=dn / rounds, ms_per_round=pms / rounds, tau=pn / rounds, prompt_ms=sum(t["prompt_ms"] for t in rows))
        out[name] = res; print(name, json.dumps(res), flush=True)
    finally:
        peer.close()
json.dump(out, open(log / "result.json", "w"), indent=1)
