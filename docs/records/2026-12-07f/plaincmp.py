import json, subprocess, sys, time, urllib.request, torch
sys.path.insert(0, "/work/main/tests")
from pathlib import Path
from draftsmith.api import load_target
from draftsmith.deploy import llamacpp
from draftsmith.drafters.plain import PlainDrafter
from draftsmith.engine.decode import speculative_generate
from test_llamacpp import free_port, peer_ready
W = Path(sys.argv[1])
t = load_target(str(W / "target"), dtype="float32")
ids = t.encode("Write a Python function that reverses a list.")
ours = speculative_generate(t.runner, PlainDrafter(), ids, t.stop_rule(8)).tokens
port = free_port()
p = subprocess.Popen([str(llamacpp.binary("llama-server")), "-m", str(W / "gguf/target-f32.gguf"), "--host", "127.0.0.1", "--port", str(port), "-t", "2", "-c", "2048"], stdout=open(W / "plain.log", "w"), stderr=subprocess.STDOUT)
try:
    peer_ready(port, p)
    body = {"prompt": ids, "n_predict": 8, "temperature": 0, "top_k": 1, "cache_prompt": False, "return_tokens": True}
    r = json.loads(urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/completion", data=json.dumps(body).encode()), timeout=120).read())
    print("ours", ours, "theirs", r.get("tokens"))
    with torch.no_grad():
        lg = t.model(torch.tensor([ids])).logits[0, -1]
    top = lg.topk(3)
    print("our top3 logits", top.values.tolist(), top.indices.tolist())
finally:
    p.terminate()
