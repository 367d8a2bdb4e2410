"""`draftsmith build`: a user's prompts to a drafter, its scores, a bench, exports and a report, in one
resumable run (state.py: the build's record; stages.py: what each stage does; report.py: report.md)."""
