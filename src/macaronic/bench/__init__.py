"""Benchmarks: every comparison measured side by side in one run, medians and ratios quoted."""
