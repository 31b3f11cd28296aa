"""The contract: a published YAML file that says how pairs are judged, and the sealed evaluator."""
