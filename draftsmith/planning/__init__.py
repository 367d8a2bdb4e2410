"""`draftsmith plan`: predict, for a machine and a model, whether speculation pays, with which method
and draft length, before switching it on (the cost model: docs/PLANNING.md)."""
