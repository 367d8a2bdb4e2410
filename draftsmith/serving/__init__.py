"""An OpenAI-compatible HTTP server over draftsmith's decoding engine, and a load tester that drives it.

The modules keep one job each so that the batched worker can replace the one-request worker
without touching the HTTP layer:

- requests.py the worker contract: submit a request, receive text deltas, cancel
- worker.py   today's worker: one background thread decoding one request at a time
- prompts.py  request text -> token ids (the target's own chat template and tokenizer)
- schemas.py  OpenAI-style request and response bodies (pydantic)
- errors.py   OpenAI-style error bodies
- metrics.py  counters fed by the worker's statistics, rendered as Prometheus text
- app.py      the FastAPI routes
- server.py   running the app with uvicorn (blocking, or in a background thread)
- loadtest.py the HTTP load generator behind `draftsmith loadtest`

Import the submodules directly; this package imports nothing heavy on its own.
"""
