"""Issue 8, session 26: regenerate answers and train DFlash / DSpark on one GPU, in one device call.

The device machine has torch and transformers but no tokenizer data, prompt packages or network:
`pretokenize.py` turned everything into token ids here, `target_pack.py` carries the target's
quantised weights (rebuilt bit-identically). On the GPU the target's states are computed per
training batch (no disk cache), answers are regenerated with transformers' `generate`, and the
trainers pick the new answers up as they appear. Each drafter uses draftsmith's own model, block
layout and loss (drafters/dflash), so what comes back loads like any trained drafter.

Subcommands (each prints one prefixed line per event to stdout):
  check                 rebuild the target and compare it with the reference computed on the CPU
  regen --budget S      T 0.7 answers to the prompts in priority order for S seconds
  train --method M --name N --budget S [--lr ...]   train for S seconds (time-based WSD schedule)
  smoke                 every path above on a random 2-layer target (no weights needed)
Paths: .dev1/ and .dev2/ under the repository root, the working directory (inputs: each fits one
device call), $OUT (results), /tmp/regen (answers handed to the trainers). `gpu_run.sh` runs it all.
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import math
import os
import sys
import tarfile
import time
import types
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from multiprocessing import get_context
from pathlib import Path

ROOT = Path(os.environ.get("DS_ROOT", os.getcwd()))  # the repository root (the device runs there)
# import draftsmith's modules without its package __init__ (which pulls the whole CLI stack)
_pkg = types.ModuleType("draftsmith")
_pkg.__path__ = [str(ROOT / "draftsmith")]
sys.modules["draftsmith"] = _pkg
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from target_pack import unpack  # noqa: E402

from draftsmith.drafters.checkpoint import load_weights  # noqa: E402
from draftsmith.drafters.dflash.checkpoint import save_drafter  # noqa: E402
from draftsmith.drafters.dflash.config import DFlashConfig  # noqa: E402
from draftsmith.drafters.dflash.lookup import batch_guesses  # noqa: E402
from draftsmith.drafters.dflash.model import DFlashModel  # noqa: E402
from draftsmith.drafters.dflash.recipe import DFlashOptions, DFlashRecipe  # noqa: E402
from draftsmith.drafters.dflash.training import block_loss, build_blocks  # noqa: E402
from draftsmith.training.anchors import sample_anchors  # noqa: E402
from draftsmith.training.cache import Sequence  # noqa: E402

D1, D2 = ROOT / ".dev1", ROOT / ".dev2"
OUT = Path(os.environ.get("OUT", "/tmp/gpu_out"))
REGEN = Path(os.environ.get("REGEN_DIR", "/tmp/regen"))
T0 = time.time()
NAME = "job"


def log(*a) -> None:
    print(f"[{NAME} {time.time() - T0:6.1f}s]", *a, flush=True)


def device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def hf_config(c: dict):
    from transformers import LlamaConfig

    cfg = LlamaConfig(
        vocab_size=c["vocab_size"], hidden_size=c["hidden_size"], intermediate_size=c["intermediate_size"],
        num_hidden_layers=c["num_hidden_layers"], num_attention_heads=c["num_attention_heads"],
        num_key_value_heads=c["num_key_value_heads"], head_dim=c.get("head_dim"),
        rms_norm_eps=c["rms_norm_eps"], max_position_embeddings=c["max_position_embeddings"],
        tie_word_embeddings=True, bos_token_id=c["bos_token_id"], eos_token_id=c["eos_token_id"],
        pad_token_id=c.get("pad_token_id"), hidden_act="silu",
        rope_parameters={"rope_type": "default", "rope_theta": c["rope_theta"]},
    )
    cfg.rope_theta = c["rope_theta"]  # older transformers read this attribute
    return cfg


def load_target(dtype: torch.dtype, smoke: bool = False):
    """The target as a transformers Llama on the GPU (smoke: a random 2-layer one)."""
    from transformers import LlamaForCausalLM

    c = json.loads((D1 / "target-config.json").read_text())
    if smoke:
        c = {**c, "num_hidden_layers": 2}
    cfg = hf_config(c)
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg)
    if not smoke:
        sd = unpack([str(D1 / "target-a.pt"), str(D2 / "target-b.pt")], c)
        missing, unexpected = model.load_state_dict(sd, strict=False)
        assert not unexpected and set(missing) <= {"lm_head.weight"}, (missing, unexpected)
        model.tie_weights()
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    return model.to(device=device(), dtype=dtype).eval().requires_grad_(False), c


@torch.no_grad()
def target_states(model, seqs: list[np.ndarray], layers: list[int]):
    """Right-padded ids [b, T] and the target's states: features of `layers`, final-norm state,
    logsumexp and argmax of the logits (what the CPU cache stores, computed per batch)."""
    dev = device()
    t = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), t), 0, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.from_numpy(s.astype(np.int64))
    ids = ids.to(dev)
    out = model.model(input_ids=ids, output_hidden_states=True, use_cache=False)
    hs = out.hidden_states
    feats = torch.cat([hs[i] for i in layers], -1).float()
    final = out.last_hidden_state
    logits = model.lm_head(final)
    lse = torch.logsumexp(logits.float(), -1)
    greedy = logits.argmax(-1)
    return ids, feats, final.float(), lse, greedy


def check(args) -> None:
    """The rebuilt target against the CPU reference (fp32 states of a fixed sequence)."""
    model, _ = load_target(torch.float32)
    ref = np.load(D1 / "reference.npz")
    ids, feats, final, lse, greedy = target_states(model, [ref["ids"]], [int(x) for x in ref["layers"]])
    df = (feats[0].cpu() - torch.from_numpy(ref["features"]).float()).abs().max().item()
    dl = (lse[0].cpu() - torch.from_numpy(ref["lse"])).abs().max().item()
    same = (greedy[0].cpu().numpy() == ref["greedy"]).mean()
    log(f"check: features max|diff| {df:.2e}, lse max|diff| {dl:.2e}, greedy agreement {same:.4f}")
    if not (df < 5e-2 and dl < 5e-2 and same > 0.97):
        log("check FAILED: the rebuilt target is not the CPU target")
        sys.exit(3)


def unpack_ids(z, prefix: str = "") -> list[tuple[np.ndarray, np.ndarray]]:
    ids, mask, off = z[prefix + "ids"], z[prefix + "mask"], z[prefix + "offsets"]
    return [(ids[off[i] : off[i + 1]], mask[off[i] : off[i + 1]].astype(bool)) for i in range(len(off) - 1)]


def save_npz(path: Path, **arrays) -> None:
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez_compressed(tmp, **arrays)
    os.replace(tmp, path)


@torch.no_grad()
def regen(args) -> None:
    """T 0.7 / top-p 0.8 / top-k 20 answers (the committed T 0.7 settings), max 320 new tokens."""
    model, c = load_target(torch.bfloat16, args.smoke)
    eos = int(c["eos_token_id"])
    z = np.load(D1 / "prompts.npz")
    off, flat = z["offsets"], z["ids"]
    n = len(off) - 1 if not args.smoke else 64
    REGEN.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(args.seed)
    done_idx, done_ans, done_fin, part = [], [], [], 0
    tokens, t_start = 0, time.time()
    last_save = t_start

    def save_answers() -> None:
        lens = np.array([len(a) for a in done_ans], dtype=np.int64)
        save_npz(OUT / "answers.npz", prompt_index=np.array(done_idx, dtype=np.int64),
                 prompt_len=np.array([off[i + 1] - off[i] for i in done_idx], dtype=np.int64),
                 ids=np.concatenate(done_ans) if done_ans else np.zeros(0, np.uint16),
                 offsets=np.concatenate([[0], np.cumsum(lens)]).astype(np.int64),
                 eos=np.array(done_fin, dtype=bool), seconds=np.array([time.time() - t_start]))

    chunk = args.batch * 4
    for c0 in range(0, n, chunk):
        idx = list(range(c0, min(n, c0 + chunk)))
        idx.sort(key=lambda i: off[i + 1] - off[i])  # similar lengths share a batch: less padding
        for b0 in range(0, len(idx), args.batch):
            spent = time.time() - t_start
            if spent > args.budget:
                break
            rows = idx[b0 : b0 + args.batch]
            prompts = [flat[off[i] : off[i + 1]].astype(np.int64) for i in rows]
            L = max(len(p) for p in prompts)
            ids = torch.full((len(rows), L), eos, dtype=torch.long)
            att = torch.zeros((len(rows), L), dtype=torch.long)
            for j, p in enumerate(prompts):  # left padding
                ids[j, L - len(p) :] = torch.from_numpy(p)
                att[j, L - len(p) :] = 1
            out = model.generate(
                input_ids=ids.to(device()), attention_mask=att.to(device()), do_sample=True,
                temperature=0.7, top_p=0.8, top_k=20, max_new_tokens=args.max_new,
                eos_token_id=eos, pad_token_id=eos,
            )
            new = out[:, L:].cpu().numpy()
            seqs, masks = [], []
            for j, i in enumerate(rows):
                a = new[j].tolist()
                fin = eos in a
                a = a[: a.index(eos)] if fin else a
                if not a:
                    continue
                done_idx.append(i)
                done_ans.append(np.array(a, dtype=np.uint16))
                done_fin.append(fin)
                tokens += len(a)
                s = np.concatenate([prompts[j], a, [eos] if fin else []]).astype(np.uint16)[:1024]
                m = np.concatenate([np.zeros(len(prompts[j]), bool), np.ones(len(s) - len(prompts[j]), bool)])
                if m.any():
                    seqs.append(s)
                    masks.append(m)
            if seqs:  # hand this batch to the trainers
                lengths = [len(s) for s in seqs]
                save_npz(REGEN / f"part-{part:05d}.npz", ids=np.concatenate(seqs),
                         mask=np.concatenate(masks).astype(np.uint8),
                         offsets=np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64))
                part += 1
            el = time.time() - t_start
            log(f"regen: {len(done_idx)} answers, {tokens} tokens, {tokens / el:.0f} tok/s, batch L {L}")
            if time.time() - last_save > 30:  # a cut-off run still brings its answers back
                save_answers()
                last_save = time.time()
        if time.time() - t_start > args.budget:
            break
    save_answers()
    log(f"regen done: {len(done_idx)} answers, {tokens} tokens in {time.time() - t_start:.0f} s")


def lr_at(frac: float, warm: float = 0.03, decay: float = 0.2) -> float:
    """WSD over the time budget: linear warmup, constant, linear decay over the last `decay`."""
    if frac < warm:
        return max(frac / warm, 0.01)
    if frac < 1 - decay:
        return 1.0
    return max(0.0, (1 - frac) / decay)


def pack_out(model, name: str, rows: list, tmpdir: Path) -> None:
    d = tmpdir / name
    save_drafter(model, d, dtype=torch.float16)
    (d / "train_log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    tmp = OUT / f"{name}.tgz.tmp"
    with tarfile.open(tmp, "w:gz", compresslevel=3) as tf:
        for f in sorted(d.iterdir()):
            tf.add(f, arcname=f"{name}/{f.name}")
    os.replace(tmp, OUT / f"{name}.tgz")


@torch.no_grad()
def evaluate(model, target, sets: dict, layers: list[int]) -> dict[str, float]:
    """Held-out tau by the package's own teacher-forced evaluation (what `draftsmith score` reports:
    64 anchors a sequence, seed 12345), on target states computed here."""
    recipe, opts = DFlashRecipe(model.cfg.method), DFlashOptions(anchors=64)
    res = {}
    model.eval()
    for key, seqs in sets.items():
        rows = []
        for c in range(0, len(seqs), 16):  # 16 sequences a forward (right padding: causal, sliced off)
            chunk = seqs[c : c + 16]
            states = [x.cpu() for x in target_states(target, [s for s, _ in chunk], layers)]
            for i, (s, m) in enumerate(chunk):
                ids, feats, final, lse, greedy = (x[i, : len(s)] for x in states)
                rows.append(Sequence(ids, torch.from_numpy(m), feats, final, lse, greedy))
        taus = recipe.evaluate(model, rows, opts)
        res.update({f"{key}_{k}": round(v, 4) for k, v in taus.items()})
    model.train()
    return res


def next_batch(pool: list, g: torch.Generator, args) -> tuple[list, torch.Tensor, list]:
    """The sequences, loss mask [b, T] and anchors of one step, all on the CPU."""
    seqs = [pool[i] for i in torch.randint(len(pool), (args.batch,), generator=g).tolist()]
    mask = torch.zeros(len(seqs), max(len(s) for s, _ in seqs), dtype=torch.bool)
    for i, (_, m) in enumerate(seqs):
        mask[i, : len(m)] = torch.from_numpy(m)
    return seqs, mask, [sample_anchors(mask[i], args.anchors, g) for i in range(len(seqs))]


def train(args) -> None:
    global NAME
    NAME = args.name
    dev = device()
    # bf16 on the GPU; on a CPU (validation runs) transformers' bf16 linears are far slower than fp32
    target, c = load_target(torch.bfloat16 if dev.type == "cuda" else torch.float32, args.smoke)
    cfg_d = json.loads((D1 / f"drafter-{args.method}.json").read_text())
    cfg_d.pop("format", None)
    if args.markov_state:  # session 27's serial state update, from scratch at GPU scale
        cfg_d["markov_state"] = args.markov_state
    if args.layers:  # session 28: does a deeper drafter learn the copies DSpark misses?
        cfg_d["num_layers"] = args.layers
    if args.lookup:  # session 33's prompt-lookup guesses per slot (the shipped pair reads 6)
        cfg_d["lookup_input"] = args.lookup
    if args.smoke:
        cfg_d["target_layers"] = [0, 1]
    cfg = DFlashConfig(**cfg_d)
    layers = list(cfg.target_layers)
    pool = unpack_ids(np.load(D1 / "seqs.npz"))
    if args.smoke:
        pool = pool[:200]
    held = np.load(D1 / "heldout.npz")
    sets = {"dev": unpack_ids(held, "dev_"), "ho": unpack_ids(held, "ho_")}
    if args.smoke or args.eval_limit:
        sets = {k: v[: 4 if args.smoke else args.eval_limit] for k, v in sets.items()}
    # a strided subset (the dev set runs suite by suite), keys prefixed "q": the curve compares like with like
    quick = {f"q{k}": v[:: max(1, len(v) // args.eval_quick)][: args.eval_quick] for k, v in sets.items()}
    # draft vocabulary: the most frequent learned tokens of the committed answers (as recipe.build)
    counts = np.zeros(cfg.target_vocab_size, dtype=np.int64)
    for s, m in pool:
        counts += np.bincount(s[m].astype(np.int64), minlength=cfg.target_vocab_size)
    torch.manual_seed(args.seed)
    if args.init:  # continue a trained drafter: its own config (vocabulary, layers, heads) and weights
        cfg = DFlashConfig.load(Path(args.init))
        layers = list(cfg.target_layers)
        model = load_weights(DFlashModel(cfg), Path(args.init)).float()
    else:
        model = DFlashModel(cfg)
        model.init_weights(args.seed)
        if cfg.draft_vocab_size and cfg.draft_vocab_size < cfg.target_vocab_size:
            model.d2t = torch.from_numpy(counts).topk(cfg.draft_vocab_size).indices.sort().values
    model.to(dev)
    model.requires_grad_(True)
    emb = target.model.embed_tokens.weight.float()
    model.attach_target(emb, emb)  # tied: the lm_head is the embedding
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.0, betas=(0.9, 0.95), fused=dev.type == "cuda")
    g = torch.Generator().manual_seed(args.seed)
    rows, step, seen_parts, blocks_seen, ans_tokens = [], 0, set(), 0, 0
    tmpdir = Path(f"/tmp/train-{args.name}")
    t_start = last_save = last_eval = time.time()
    log(f"train {args.method}: pool {len(pool)} sequences, draft vocab {cfg.draft_vocab_size}, lr {args.lr}")
    # session 44: the drafter's prompt-lookup guesses (session 33; the shipped pair reads 6) cost ~0.15 s
    # of numpy a step of 16 x 256 anchors, so worker processes compute them two batches ahead
    workers = None
    if cfg.lookup_input:
        workers = ProcessPoolExecutor(args.guess_workers, mp_context=get_context("spawn"))

    def prefetch(batch):
        if workers is None:
            return batch, None
        seqs, _, anchors = batch
        args_ = ([s for s, _ in seqs], [a.numpy() for a in anchors], cfg.block_size, cfg.lookup_input)
        return batch, workers.submit(batch_guesses, *args_)

    ahead = collections.deque(prefetch(next_batch(pool, g, args)) for _ in range(2))
    while True:
        frac = (time.time() - t_start) / args.budget
        if frac >= 1:
            break
        if step % 25 == 0:  # new answers from the regeneration job
            for p in sorted(glob.glob(str(REGEN / "part-*.npz"))):
                if p not in seen_parts:
                    try:
                        pool += unpack_ids(np.load(p))
                        seen_parts.add(p)
                    except Exception as e:  # a part being written: next time
                        log(f"skip {p}: {e}")
        lr = args.lr * lr_at(frac)
        for group in opt.param_groups:
            group["lr"] = lr
        (seqs, mask, anchors), guesses = ahead.popleft()
        ahead.append(prefetch(next_batch(pool, g, args)))
        ids, feats, final, lse, greedy = target_states(target, [s for s, _ in seqs], layers)
        blocks = build_blocks(ids, mask.to(dev), anchors, cfg.block_size, cfg.mask_token_id, greedy)
        if guesses is not None:  # session 44: computed by a worker while the last steps ran
            g_ids, g_lens = (torch.from_numpy(x).to(dev) for x in guesses.result())
            blocks = replace(blocks, guess_ids=g_ids, guess_lens=g_lens)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
            loss, met = block_loss(model, blocks, feats, final, target_lse=lse, label="token",
                                   ce_weight=args.ce_weight, loss_slots=args.loss_slots,
                                   survival=args.survival)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gn = float(torch.nn.utils.clip_grad_norm_(params, 1.0))
        if math.isfinite(gn):  # session 29: one NaN gradient (bf16, lr 2e-3) turned a drafter into NaN
            opt.step()
        step += 1
        blocks_seen += sum(len(a) for a in anchors)
        ans_tokens += int(mask.sum())
        row = {"step": step, "seconds": round(time.time() - t_start, 1), "lr": lr, "grad_norm": round(gn, 3),
               "blocks": blocks_seen, "answer_tokens_seen": ans_tokens, "pool": len(pool),
               **{k: round(v, 4) for k, v in met.items()}}
        now = time.time()
        # intermediate evaluations on the first --eval-quick sequences of each set, the last on all:
        # in session 29 a full one took ~35 s of a trainer's 450 (four of them: ~30% of its budget)
        if now - last_eval > args.eval_every or (step == 1 and args.smoke):
            row.update(evaluate(model, target, quick, layers))
            last_eval = time.time()
            log(json.dumps(row))
        rows.append(row)
        if time.time() - last_save > args.save_every:
            pack_out(model, args.name, rows, tmpdir)
            last_save = time.time()
        if args.smoke and step >= 3:
            break
    if workers is not None:
        workers.shutdown(cancel_futures=True)
    row = rows[-1] if rows else {"step": 0}
    row.update(evaluate(model, target, sets, layers))
    row.update(evaluate(model, target, quick, layers))
    log("final " + json.dumps(row))
    pack_out(model, args.name, rows, tmpdir)
    log(f"saved {args.name}: {step} steps")


def main() -> None:
    global NAME
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["check", "regen", "train", "smoke"])
    ap.add_argument("--method", default="dspark")
    ap.add_argument("--name", default="dspark")
    ap.add_argument("--budget", type=float, default=60)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--anchors", type=int, default=256)
    ap.add_argument("--ce-weight", type=float, default=0.5)
    ap.add_argument("--markov-state", type=int, default=0, help="DSpark: width of the serial state update")
    ap.add_argument("--layers", type=int, default=0, help="draft layers (0: the recipe's, 1)")
    ap.add_argument("--max-new", type=int, default=320)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--eval-every", type=float, default=120)
    ap.add_argument("--save-every", type=float, default=90)
    ap.add_argument("--eval-limit", type=int, default=0, help="held-out sequences per set (0: all)")
    ap.add_argument("--eval-quick", type=int, default=32, help="sequences a set, intermediate evaluations")
    ap.add_argument("--survival", action="store_true", help="survival-weighted slots (session 40)")
    ap.add_argument("--guess-workers", type=int, default=2, help="processes computing lookup guesses ahead")
    ap.add_argument("--lookup", type=int, default=0, help="from scratch: lookup guesses per slot (0: none)")
    ap.add_argument("--loss-slots", type=int, default=0, help="train only the first N slots (0: all)")
    ap.add_argument("--init", default="", help="a trained drafter directory to continue (its config wins)")
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    NAME = args.cmd if args.cmd != "train" else args.name
    log(f"torch {torch.__version__}, cuda {torch.cuda.is_available()}, "
        f"{torch.cuda.get_device_name() if torch.cuda.is_available() else 'cpu'}")
    if args.cmd == "smoke":  # every path, tiny: catches device bugs before the real run
        args.smoke, args.budget = True, 20
        args.batch, args.max_new = 4, 8
        regen(args)
        args.batch, args.anchors = 2, 16
        arms = (("dspark", 0, 0), ("dflash", 0, 0), ("dspark", 64, 0), ("dspark", 0, 2))
        args.survival = True  # the shipped recipe's loss and inputs (sessions 33 and 40)
        args.lookup = 6
        for method, state, layers in arms:
            args.method, args.markov_state, args.layers = method, state, layers
            name = f"smoke-{method}" + (f"-state{state}" if state else "")
            args.name = name + (f"-l{layers}" if layers else "")
            train(args)
        log("smoke OK")
        return
    {"check": check, "regen": regen, "train": train}[args.cmd](args)


if __name__ == "__main__":
    main()
