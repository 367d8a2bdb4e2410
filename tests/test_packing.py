"""oneDNN-packed weights (engine/packing.py): same function as the dense layers, used only for
decoding, and a drafter loaded from disk drafts exactly what its unpacked model drafts."""

from __future__ import annotations

import pytest
import torch
from conftest import tiny_target
from test_dflash import make_drafter

from draftsmith.drafters.dflash.checkpoint import save_drafter
from draftsmith.drafters.dflash.drafter import DFlashDecodeOptions
from draftsmith.drafters.dspark.drafter import DSparkDrafter
from draftsmith.drafters.plain import PlainDrafter
from draftsmith.engine.decode import StopRule, speculative_generate
from draftsmith.engine.packing import PackedLinear, pack_linears, pack_weight, packable_dtypes, packed_linear

needs_onednn = pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="no oneDNN in this torch")


@needs_onednn
def test_a_packed_linear_computes_the_dense_one_for_any_rows():
    torch.manual_seed(0)
    dense = torch.nn.Linear(48, 96, bias=True)
    net = torch.nn.Sequential(dense)
    assert pack_linears(net) == 1 and isinstance(net[0], PackedLinear)
    assert net[0].weight is dense.weight  # code that reads .weight (dtype, device) still works
    for shape in [(1, 48), (3, 48), (2, 5, 48)]:
        x = torch.randn(shape)
        torch.testing.assert_close(net(x), dense(x), rtol=1e-5, atol=1e-5)
    w = torch.randn(64, 32)
    torch.testing.assert_close(packed_linear(torch.ones(2, 32), pack_weight(w)), torch.ones(2, 32) @ w.t())


@needs_onednn
def test_bf16_weights_are_packed_only_where_the_cpu_computes_bf16_natively():
    torch.manual_seed(0)
    w = torch.randn(64, 32).to(torch.bfloat16)
    packed = pack_weight(w)
    if torch.bfloat16 not in packable_dtypes():
        assert packed is None
        return
    x = torch.randn(5, 32).to(torch.bfloat16)
    y = packed_linear(x, packed)
    assert y.dtype == torch.bfloat16
    torch.testing.assert_close(y.float(), x.float() @ w.float().t(), rtol=2e-2, atol=5e-2)


def test_packing_is_off_for_what_onednn_does_not_take_and_by_switch(monkeypatch):
    assert pack_weight(torch.randn(8, 8, dtype=torch.float64)) is None  # only fp32 is packed
    monkeypatch.setenv("DRAFTSMITH_PACKED", "0")
    assert pack_linears(torch.nn.Sequential(torch.nn.Linear(8, 8))) == 0


@needs_onednn
def test_a_dspark_drafter_loaded_to_draft_is_packed_and_drafts_the_same(tmp_path):
    target = tiny_target()
    model = make_drafter(target, dspark=True)
    save_drafter(model, tmp_path / "d")
    loaded = DSparkDrafter.build(target, DFlashDecodeOptions(drafter=str(tmp_path / "d")))
    assert any(isinstance(m, PackedLinear) for m in loaded.model.modules())
    assert loaded.model.head_packed is not None
    # a model handed in may still train
    in_memory = DSparkDrafter.build(target, DFlashDecodeOptions(drafter=model))
    assert not any(isinstance(m, PackedLinear) for m in in_memory.model.modules())
    ids = torch.arange(3, 23)
    plain = speculative_generate(target.runner, PlainDrafter(), ids, StopRule(24))
    a = speculative_generate(target.runner, loaded, ids, StopRule(24))
    b = speculative_generate(target.runner, in_memory, ids, StopRule(24))
    assert a.tokens == b.tokens == plain.tokens
    assert a.stats.drafted == b.stats.drafted and a.stats.accepted == b.stats.accepted
