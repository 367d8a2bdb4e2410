"""The engines people deploy drafters in, driven from draftsmith: llama.cpp today (install, convert,
serve as a bench peer). vLLM and SGLang load the export formats directly (draftsmith.export)."""
