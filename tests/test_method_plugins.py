"""A new method is one class (its package) plus one registry entry: decoding, the batched engine,
`draftsmith methods` and `draftsmith export` all find it through the registry, with no other file
changed. A toy method registered at run time shows it."""

from __future__ import annotations

import json

import pytest
from conftest import tiny_target

from draftsmith.drafters import registry
from draftsmith.drafters.plain import PlainDrafter
from draftsmith.engine.batch_decode import BatchDecoder, batch_generate
from draftsmith.engine.decode import StopRule, speculative_generate
from draftsmith.engine.drafter import Draft, Drafter
from draftsmith.errors import DraftsmithError
from draftsmith.export.methods import check_format, export_directory, method_of


class RepeatDrafter(Drafter):
    """Guesses that the last token repeats; its 'checkpoints' are a config.json with one field."""

    name = "repeat"
    description = "test method: the last token, again"
    default_k = 2
    export_formats = ("repeat-json",)

    @classmethod
    def owns(cls, path, config: dict | None) -> bool:
        return bool(config) and config.get("format") == "repeat/1"

    @classmethod
    def export(cls, directory, fmt, out, target, verifier):
        out.mkdir(parents=True, exist_ok=True)
        (out / "repeat.json").write_text(json.dumps({"verifier": verifier.name, "from": str(directory)}))
        return out

    def propose(self, tokens, k, params, generator) -> Draft:
        return Draft(tokens[-1:].repeat(k))


@pytest.fixture
def registered(monkeypatch):
    monkeypatch.setitem(registry.ENTRIES, "repeat", f"{__name__}:RepeatDrafter")  # the one registry line


def test_a_method_added_by_one_registry_entry_decodes_lists_and_exports(registered, tmp_path, capsys):
    from draftsmith.cli import main

    target = tiny_target()
    drafter = registry.build_drafter("repeat", target)
    prompts = [[5, 6, 7, 7], [9, 3, 3, 3, 3]]
    for ids in prompts:
        plain = speculative_generate(target.runner, PlainDrafter(), ids, StopRule(20)).tokens
        assert speculative_generate(target.runner, drafter, ids, StopRule(20)).tokens == plain
    batched = batch_generate(
        BatchDecoder(target.runner, 2, 64, "fixed"), prompts, [drafter.fork() for _ in prompts], StopRule(20)
    )
    for (tokens, *_), ids in zip(batched, prompts, strict=True):
        assert tokens == speculative_generate(target.runner, PlainDrafter(), ids, StopRule(20)).tokens

    assert main(["methods"]) == 0
    listed = capsys.readouterr().out
    assert "repeat         test method: the last token, again [export: repeat-json]" in listed

    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "config.json").write_text(json.dumps({"format": "repeat/1"}))
    assert method_of(tmp_path / "d") == "repeat"
    with pytest.raises(DraftsmithError, match="does not fit a repeat drafter; its formats: repeat-json"):
        check_format("repeat", "speculators")
    out, _ = export_directory(tmp_path / "d", "repeat-json", tmp_path / "o", target, "org/target")
    assert json.loads((out / "repeat.json").read_text())["verifier"] == "org/target"


def test_a_directory_no_method_claims_is_refused_by_name(tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "config.json").write_text(json.dumps({"format": "something-else/1"}))
    with pytest.raises(DraftsmithError, match="holds no drafter draftsmith can export"):
        method_of(tmp_path / "x")
    with pytest.raises(DraftsmithError, match="no readable config.json"):
        method_of(tmp_path)


def test_every_registered_method_loads_and_describes_itself():
    for name, cls in registry.METHODS.items():
        assert issubclass(cls, Drafter) and cls.name == name and cls.description
        assert all(isinstance(f, str) for f in cls.export_formats)
