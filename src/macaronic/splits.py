"""The three splits every task family belongs to for good: train, dev, test (test is sealed by
the contract). One definition, read by the suites, the routing data and the contract."""

SPLITS = ("train", "dev", "test")


def check_split(split: str | None) -> None:
    if split is not None and split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
