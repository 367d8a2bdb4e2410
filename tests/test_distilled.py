"""The self-distilled draft model: cut from the target, distilled on its cache, saved as an HF directory."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import VOCAB, hf_target

from draftsmith.api import generate
from draftsmith.drafters.distilled.model import DistilledDraft, pick_layers
from draftsmith.drafters.distilled.training import DEPTH, collate, distill_loss, hit_maps, taus
from draftsmith.drafters.registry import build_drafter
from draftsmith.errors import DraftsmithError
from draftsmith.training.cache import TargetCache, build_cache
from draftsmith.training.regenerate import RegenConfig, local_engine, regenerate
from draftsmith.training.train import TrainConfig, train

ARCHS = ["llama", "gemma3_text"]  # the lean runner's family and the generic HF path


@pytest.fixture(scope="module", params=ARCHS)
def setup(request, tmp_path_factory):
    """A tiny target of each architecture and a cache of its own greedy answers."""
    tmp = tmp_path_factory.mktemp(request.param)
    target = hf_target(request.param)
    g = torch.Generator().manual_seed(0)
    prompts = tmp / "prompts.jsonl"
    rows = [
        {
            "id": f"p{i}",
            "prompt": " ".join(f"t{t}" for t in torch.randint(3, VOCAB, (6,), generator=g).tolist()),
        }
        for i in range(8)
    ]
    prompts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    answers = tmp / "answers.jsonl"
    regenerate(prompts, answers, local_engine(target, RegenConfig(max_new_tokens=24)), progress=False)
    build_cache(target, answers, tmp / "cache", [1, 2], dtype="float32", progress=False)
    return target, TargetCache(tmp / "cache", target), tmp


def config(**over) -> TrainConfig:
    base = dict(method="distilled", steps=4, batch=2, lr=3e-3, eval_every=2, save_every=2, held_out=2)
    return TrainConfig.from_flat(**{**base, "num_layers": 2, **over})


def test_layer_choice():
    assert pick_layers(30, 4, "evenly") == [0, 10, 19, 29]
    assert pick_layers(30, 4, "first") == [0, 1, 2, 3]
    assert pick_layers(4, 1, "evenly") == [0]
    with pytest.raises(DraftsmithError, match="1 to 4 layers"):
        pick_layers(4, 5, "first")


@pytest.mark.parametrize("init", ["evenly", "first"])
def test_draft_layers_are_copies_of_the_target_layers(setup, init):
    target, _, _ = setup
    draft = DistilledDraft.from_target(target, 2, init)
    assert draft.source_layers == ([0, 3] if init == "evenly" else [0, 1])
    theirs = target.model.state_dict()
    for key, value in draft.lm.state_dict().items():
        if ".layers." in key:
            head, rest = key.split(".layers.")
            j, tail = rest.split(".", 1)
            key = f"{head}.layers.{draft.source_layers[int(j)]}.{tail}"
        torch.testing.assert_close(value, theirs[key], rtol=0, atol=0)
    frozen = {n for n, p in draft.named_parameters() if not p.requires_grad}
    assert frozen == {"lm.model.embed_tokens.weight", "lm.lm_head.weight"}  # the target's token space
    # all of the target's layers: the draft is the target, so its argmax is the cached greedy token
    whole = DistilledDraft.from_target(target, 4, "first")
    seq = setup[1][0]
    with torch.no_grad():
        logits = whole.logits(whole.states(seq.ids[None]))[0]
    assert (logits.argmax(-1) == seq.greedy).all()
    torch.testing.assert_close(torch.logsumexp(logits, -1), seq.lse, atol=1e-4, rtol=1e-4)


def test_accepted_length_counts_the_run_of_argmax_hits_from_an_anchor():
    # positions 0..7; answer from 2 on; the draft misses at 5; the written text leaves greedy at 6
    ids = torch.tensor([[9, 9, 1, 2, 3, 4, 5, 6]])
    sel = torch.tensor([[False, True, True, True, True, True, True, False]])  # next token is an answer
    nxt = ids[0, 1:][sel[0, :-1]]
    pred = nxt.clone()
    pred[4] = 0  # the prediction at position 5
    greedy = nxt.clone()
    greedy[4] = 0  # at 5 the target's argmax was 0, not the written 5 ...
    link = torch.ones_like(sel)  # link[t]: the written token t is greedy's choice at t - 1 ...
    link[0, 6] = False  # ... except at 6 (greedy chose 0 at 5)
    maps = hit_maps(sel, pred, nxt, greedy, link)
    anchors = torch.zeros_like(sel)
    anchors[0, 2] = True
    got = taus(maps, anchors)
    assert got["tau"] == 1 + 3  # hits at 2, 3, 4; miss at 5
    assert got["tau_k3"] == 1 + 3
    assert got["tau_greedy"] == 1 + 4  # 2, 3, 4 and 5 (0 is greedy's choice); 6 is off the path
    assert got["tau_greedy_k3"] == 1 + 3
    anchors[0, 2], anchors[0, 6] = False, True
    assert taus(maps, anchors)["tau"] == 1 + 1  # slot 0 needs no link; the sequence then ends
    assert DEPTH == 7


def test_training_lowers_the_loss(setup):
    """(Exact resume: test_training_pipeline.py, for every trainable method.)"""
    target, cache, tmp = setup
    cfg = config(steps=6, lr=1e-2)
    train(target, cache, cfg, tmp / "straight", progress=False, resume=False)
    a = torch.load(tmp / "straight" / "trainer_state.pt", weights_only=False)
    assert a["step"] == 6
    last = a["log"][-1]
    assert {"held_out_tau", "held_out_tau_k3", "held_out_tau_greedy", "held_out_tau_greedy_k3"} <= set(last)
    # the same fixed batch scores lower after training than at the start
    draft = DistilledDraft.from_target(target, 2, "evenly")
    batch = collate([cache[i] for i in range(6)], target.device)
    before = distill_loss(draft, batch)[0].item()
    draft.load_state_dict(a["model"])
    assert distill_loss(draft, batch)[0].item() < before


def test_a_non_finite_gradient_skips_the_step_and_a_diverged_run_stops(setup, monkeypatch):
    """A bf16 overflow must not turn the weights into NaN (a GPU run once lost its drafter so)."""
    import draftsmith.training.train as tr

    target, cache, tmp = setup
    cfg = config(steps=5, lr=1e-2)
    real, calls = cfg.recipe.loss, []

    def poisoned(model, batch, opts):  # steps 2 and 3 overflow
        loss, metrics = real(model, batch, opts)
        calls.append(1)
        return (loss * float("nan"), metrics) if len(calls) in (2, 3) else (loss, metrics)

    monkeypatch.setattr(cfg.recipe, "loss", poisoned)
    res = train(target, cache, cfg, tmp / "skips", progress=False, resume=False)
    state = torch.load(tmp / "skips" / "trainer_state.pt", weights_only=False)
    assert res["steps"] == 5 and all(torch.isfinite(v).all() for v in state["model"].values())
    assert [bool(r.get("skipped")) for r in state["log"]] == [False, True, True, False, False]
    monkeypatch.setattr(cfg.recipe, "loss", lambda m, b, o: (real(m, b, o)[0] * float("nan"), {"loss": 0.0}))
    monkeypatch.setattr(tr, "MAX_NONFINITE", 3)
    with pytest.raises(DraftsmithError, match="3 steps in a row had non-finite gradients"):
        train(target, cache, cfg, tmp / "diverged", progress=False, resume=False)


@pytest.mark.parametrize("label,topk", [("soft", 0), ("soft", 8), ("token", 0)])
def test_chunked_loss_has_plain_autograd_gradients(setup, monkeypatch, label, topk):
    """The loss takes each chunk's gradient eagerly (memory-bounded); it must equal plain autograd."""
    import draftsmith.drafters.distilled.training as tr

    target, cache, _ = setup
    batch = collate([cache[i] for i in range(3)], target.device)

    def grads(chunk: int) -> tuple[float, list[torch.Tensor]]:
        monkeypatch.setattr(tr, "CHUNK", chunk)
        draft = DistilledDraft.from_target(target, 2, "evenly")
        loss = distill_loss(draft, batch, label, topk)[0]
        loss.backward()
        return loss.item(), [p.grad for p in draft.parameters() if p.requires_grad]

    def reference(draft) -> torch.Tensor:  # the textbook form, one autograd graph
        h = draft.states(batch.ids, batch.attention)[batch.sel]
        teacher = draft.logits(batch.final).detach()
        if label == "token":
            return torch.nn.functional.cross_entropy(draft.logits(h), batch.next_ids)
        if topk:
            top = teacher.topk(topk, -1)
            z = draft.logits(h).gather(1, top.indices)
            return -(top.values.softmax(-1) * z.log_softmax(-1)).sum(-1).mean()
        return -(teacher.softmax(-1) * draft.logits(h).log_softmax(-1)).sum(-1).mean()

    loss_a, grads_a = grads(7)  # several chunks
    draft = DistilledDraft.from_target(target, 2, "evenly")
    ref = reference(draft)
    ref.backward()
    assert loss_a == pytest.approx(ref.item(), rel=1e-5)
    for g, p in zip(grads_a, [p for p in draft.parameters() if p.requires_grad], strict=True):
        torch.testing.assert_close(g, p.grad, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("label,topk", [("soft", 8), ("token", 0), ("greedy", 0)])
def test_other_labels_train(setup, label, topk):
    target, cache, tmp = setup
    out = tmp / f"label-{label}"
    res = train(
        target, cache, config(steps=2, label=label, soft_topk=topk), out, progress=False, resume=False
    )
    assert res["steps"] == 2 and torch.isfinite(torch.tensor(res["last"]["loss"]))


@pytest.mark.parametrize("layers", [2, 4])  # 4: the whole target, so most drafts are accepted
def test_saved_directory_is_a_plain_hf_model_that_decodes_like_plain(setup, layers):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target, cache, tmp = setup
    out = tmp / f"run-{layers}"
    train(target, cache, config(steps=2, num_layers=layers, lr=1e-5), out, progress=False, resume=False)
    lm = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(out)
    assert tok.get_vocab() == target.tokenizer.get_vocab() and lm.config.num_hidden_layers == layers
    state = torch.load(out / "trainer_state.pt", weights_only=False)["model"]
    for k, v in lm.state_dict().items():
        torch.testing.assert_close(v, state["lm." + k])
    meta = json.loads((out / "draftsmith_draft.json").read_text())
    assert meta["target_name"] == target.name and meta["source_layers"] == (
        [0, 3] if layers == 2 else [0, 1, 2, 3]
    )
    # reloaded for scoring, it gives the held-out taus the trainer logged (same sequences and anchors)
    from draftsmith.drafters.registry import METHODS
    from draftsmith.training.recipe import make_options

    recipe = METHODS["distilled"].recipe
    model = METHODS["distilled"].load_model(target, out)
    opts = make_options(recipe, {"anchors": 64, "block_size": model.cfg.block_size})
    logged = json.loads((out / "train_log.jsonl").read_text().splitlines()[-1])
    held = [cache[i] for i in range(len(cache) - 2, len(cache))]
    for k, v in recipe.evaluate(model, held, opts).items():
        assert v == pytest.approx(logged["held_out_" + k])
    prompt = target.encode("t5 t9 t17 t33")
    plain = generate(target, prompt, "plain", max_new_tokens=24).tokens
    for method, options in (("draft-model", {"draft_model": str(out)}), ("distilled", {"drafter": str(out)})):
        got = generate(target, prompt, method, max_new_tokens=24, k=3, **options)
        assert got.tokens == plain and got.method == method
        if layers == 4:
            assert got.stats.accepted > got.stats.drafted // 2


def test_bad_inputs_are_clear_errors(setup, tmp_path):
    target, cache, tmp = setup
    with pytest.raises(DraftsmithError, match="1 to 4 layers"):
        train(target, cache, config(num_layers=5), tmp_path / "deep", progress=False)
    with pytest.raises(DraftsmithError, match="layer_init"):
        config(layer_init="last")
    with pytest.raises(DraftsmithError, match="needs --drafter"):
        build_drafter("distilled", target)
    with pytest.raises(DraftsmithError, match="not a distilled draft"):
        build_drafter("distilled", target, drafter=str(tmp_path))
    out = tmp / "for-other"
    train(target, cache, config(steps=1), out, progress=False, resume=False)
    other = hf_target("qwen3")
    with pytest.raises(DraftsmithError, match="distilled from target"):
        build_drafter("distilled", other, drafter=str(out))
    from conftest import tiny_target  # the stub tokenizer of other tests cannot be saved with the draft

    with pytest.raises(DraftsmithError, match="tokenizer cannot be saved"):
        train(tiny_target(), cache, config(), tmp_path / "stub", progress=False)


def test_a_tied_target_exports_one_embedding_matrix_in_float16(tmp_path):
    """SmolLM2 ties its embeddings: the fp16 export must not store the 28M-parameter matrix twice."""
    from safetensors import safe_open
    from transformers import AutoModelForCausalLM

    from draftsmith.drafters.distilled.checkpoint import save_draft

    target = hf_target("llama")
    target.model.config.tie_word_embeddings = True
    target.model.tie_weights()
    draft = DistilledDraft.from_target(target, 2, "first")
    save_draft(draft, tmp_path, torch.float16)
    with safe_open(str(tmp_path / "model.safetensors"), "pt") as f:
        assert "lm_head.weight" not in f.keys() and f.get_tensor("model.norm.weight").dtype == torch.float16
    lm = AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.float32)
    assert lm.lm_head.weight.data_ptr() == lm.model.embed_tokens.weight.data_ptr()
