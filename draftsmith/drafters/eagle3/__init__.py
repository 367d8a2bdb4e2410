"""EAGLE-3 (Li et al. 2025): one decoder layer over fused low/mid/high target features, trained
with the training-time test (its own unrolled predictions), drafting a chain."""
