"""`python -m draftsmith.cli` (as torchrun runs training on several GPUs)."""

import sys

from draftsmith.cli import main

sys.exit(main())
