import shutil, sys, torch
from pathlib import Path
from transformers import AutoConfig, AutoModelForCausalLM
from draftsmith.models.loading import hf_directory
out = Path(sys.argv[1]); arch = sys.argv[2] if len(sys.argv) > 2 else "qwen3"
tok = Path(hf_directory(None))
cfg = AutoConfig.for_model(arch, vocab_size=49152, hidden_size=256, intermediate_size=512, num_hidden_layers=8,
    num_attention_heads=4, num_key_value_heads=2, head_dim=64, tie_word_embeddings=True, initializer_range=0.1, max_position_embeddings=4096,
    bos_token_id=1, eos_token_id=2, pad_token_id=2)
torch.manual_seed(0)
m = AutoModelForCausalLM.from_config(cfg)
m.save_pretrained(out)
for f in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
    shutil.copy(tok / f, out / f)
print(out, sum(p.numel() for p in m.parameters()))
