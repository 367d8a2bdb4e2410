"""DSpark: DFlash's parallel block drafter plus a serial Markov head (each slot's logits corrected by
the token drafted before it) and a confidence head (each slot's chance of acceptance, which can stop
a draft early). The backbone, checkpoint format, trainer and exports are DFlash's
(drafters/dflash/: `DFlashConfig.markov_rank` > 0 turns the heads on), so this package is the
method's name in the registry and what differs at decoding time."""
