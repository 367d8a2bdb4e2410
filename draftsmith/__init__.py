"""draftsmith: own your draft model. Lossless speculative decoding, drafter training, honest numbers."""

from draftsmith.api import Completion, generate, load_target
from draftsmith.drafters.registry import METHODS, build_drafter
from draftsmith.engine.sampling import SamplingParams
from draftsmith.errors import DraftsmithError

__all__ = [
    "Completion",
    "DraftsmithError",
    "METHODS",
    "SamplingParams",
    "build_drafter",
    "generate",
    "load_target",
]
__version__ = "0.1.0"
