"""Seeded task suites with graders (coding, chat): `generate_tasks(split, n_per_family, seed)`
and `grade(task, reply) -> dict`. Families belong to one split for good; test is sealed by the
contract, not here."""
