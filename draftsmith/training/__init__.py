"""Drafter training: prompt sets and (later) data generation and training loops."""
