"""The DSpark drafter: DFlash's drafter with the Markov and confidence heads its checkpoint carries."""

from __future__ import annotations

from draftsmith.drafters.dflash.drafter import DFlashDrafter
from draftsmith.drafters.dflash.recipe import DFlashRecipe


class DSparkDrafter(DFlashDrafter):
    name = "dspark"
    description = "DSpark: DFlash backbone + serial Markov head + confidence head (needs a trained drafter)"
    recipe = DFlashRecipe("dspark")
