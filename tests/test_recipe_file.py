"""Training recipes as TOML files: `draftsmith train --recipe FILE` expands them into flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from draftsmith.errors import DraftsmithError
from draftsmith.training.recipe_file import expand_recipe, recipe_args

ROOT = Path(__file__).resolve().parents[1]


def test_a_recipe_expands_to_flags_the_command_line_overrides(tmp_path):
    recipe = tmp_path / "r.toml"
    recipe.write_text(
        'method = "dspark"\nsteps = 700\nlr = 5e-4\nqk-norm = true\nsurvival = false\ncache = "c"\n'
    )
    argv = expand_recipe(["train", "--out", "o", "--recipe", str(recipe), "--steps", "5"])
    assert argv[:1] == ["train"]
    flags = argv[1:]
    assert flags[:2] == ["--method", "dspark"] and "--qk-norm" in flags and "--no-survival" in flags
    assert flags[flags.index("--cache") + 1] == str(tmp_path / "c")  # relative to the recipe file
    assert flags[-2:] == ["--steps", "5"] and flags.index("--steps") < flags.index("--out")
    from draftsmith.cli import build_parser

    args = build_parser(train_options=True).parse_args(argv)
    assert (args.steps, args.lr, args.opt_qk_norm, args.opt_survival) == (5, 5e-4, True, False)
    assert expand_recipe(["bench", "--recipe", "x"]) == ["bench", "--recipe", "x"]


def test_bad_recipes_get_one_line_errors(tmp_path, capsys):
    from draftsmith.cli import main

    with pytest.raises(DraftsmithError, match="not found"):
        recipe_args(tmp_path / "missing.toml")
    (tmp_path / "bad.toml").write_text("steps = = 3\n")
    with pytest.raises(DraftsmithError, match="not valid TOML"):
        recipe_args(tmp_path / "bad.toml")
    (tmp_path / "list.toml").write_text("steps = [1, 2]\n")
    with pytest.raises(DraftsmithError, match="number, string or true/false"):
        recipe_args(tmp_path / "list.toml")
    assert main(["train", "--recipe", str(tmp_path / "missing.toml")]) == 2
    assert "recipe file not found" in capsys.readouterr().err


@pytest.mark.parametrize("method", ["dflash", "dspark"])
def test_the_shipped_recipes_parse_and_build_the_exportable_drafter(method):
    """The recipes the shipped pair is built by: valid flags, the public formats' draft layers; DFlash
    in the default recipe (z-lab's layout, the whole vocabulary, no lookup input), DSpark over the
    lineage's 8,192-token vocabulary (which rebuild_shipped.sh widens to the whole vocabulary) with the
    lookup input dropped in half of its blocks, so its export without that input drafts well too."""
    from draftsmith.cli import build_parser
    from draftsmith.cli.options import options_from_args
    from draftsmith.drafters.registry import recipe_for

    recipe = ROOT / "recipes" / f"smollm2-{method}.toml"
    argv = expand_recipe(["train", "--recipe", str(recipe), "--out", "x"])
    args = build_parser(train_options=True).parse_args(argv)
    opts = options_from_args(recipe_for(args.method), args)
    assert args.method == method and opts.qk_norm and not opts.anchor_context
    assert (opts.draft_vocab, opts.mask_slots) == {"dflash": (None, True), "dspark": (8192, None)}[method]
    assert (opts.lookup_input, opts.lookup_dropout) == {"dflash": (0, 0.0), "dspark": (6, 0.5)}[method]


@pytest.mark.parametrize("name", ["dflash-anchor", "eagle3", "mtp", "medusa"])
def test_every_other_recipe_in_the_rebuild_parses(name):
    """The first stages of the pair's rebuild and the other shipped drafters' recipes parse too."""
    from draftsmith.cli import build_parser

    argv = expand_recipe(["train", "--recipe", str(ROOT / "recipes" / f"smollm2-{name}.toml"), "--out", "x"])
    assert build_parser(train_options=True).parse_args(argv).method == name.split("-")[0]
