"""`draftsmith plan`: predict, for a machine and a model, whether speculation pays, with which method
and draft length, before switching it on (cost model: REFERENCE.md section 6; docs/PLANNING.md)."""
