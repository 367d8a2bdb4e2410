"""Training recipes as small TOML files: `draftsmith train --recipe FILE [flags]`.

A recipe holds `train` flags by name (`steps = 700`, `qk-norm = true`, `lookup-input = 0`); they are
expanded in front of the command line, so a flag given there overrides the file. Relative paths in
`init-from`, `cache`, `answers` and `held-out-cache` are read from the recipe file's folder, so a
recipe names its data where it lives.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from draftsmith.errors import DraftsmithError

PATH_KEYS = ("init-from", "cache", "answers", "held-out-cache", "out")


def recipe_args(path: str | Path) -> list[str]:
    """The flags a recipe file stands for, in order."""
    file = Path(path)
    try:
        table = tomllib.loads(file.read_text())
    except FileNotFoundError:
        raise DraftsmithError(f"recipe file not found: {path}") from None
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise DraftsmithError(f"recipe {path} is not valid TOML: {e}") from None
    args: list[str] = []
    for key, value in table.items():
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            args.append(flag if value else "--no-" + flag[2:])
        elif isinstance(value, (int, float, str)):
            if key.replace("_", "-") in PATH_KEYS and not Path(str(value)).is_absolute():
                value = str((file.parent / str(value)).resolve())
            args += [flag, str(value)]
        else:
            raise DraftsmithError(f"recipe {path}: {key} must be a number, string or true/false")
    return args


def expand_recipe(argv: list[str]) -> list[str]:
    """`train --recipe FILE ...` -> `train <the file's flags> ...` (any other argv unchanged)."""
    if argv[:1] != ["train"]:
        return argv
    rest, out, i = argv[1:], [], 0
    while i < len(rest):
        a = rest[i]
        if a == "--recipe" or a.startswith("--recipe="):
            value = a.partition("=")[2] if "=" in a else (rest[i + 1] if i + 1 < len(rest) else None)
            if not value:
                raise DraftsmithError("--recipe needs a file")
            out = recipe_args(value) + out
            i += 1 if "=" in a else 2
            continue
        out.append(a)
        i += 1
    return ["train", *out]
