"""The sampler's draw (engine/sampling.py): the nucleus looked for among the most probable tokens first is the
one the sorted vocabulary gives, and draws follow the nucleus's renormalised probabilities, reproducibly."""

from __future__ import annotations

import collections

import torch

from macaronic.engine.sampling import NUCLEUS_FIRST, SamplingParams, _nucleus, make_generator, sample


def _sorted_nucleus(probs, top_p):
    sp, order = torch.sort(probs, descending=True)
    return order[sp.cumsum(0) - sp < top_p]


def test_the_nucleus_from_the_top_candidates_is_the_sorted_vocabularys():
    g = torch.Generator().manual_seed(0)
    peaked = torch.randn(50_000, generator=g) * 3
    peaked[:40] += 12
    flat = torch.randn(50_000, generator=g)  # a nucleus far past the candidates: the whole sort
    for logits in (peaked, flat, torch.randn(300, generator=g)):
        probs = torch.softmax(logits, -1)
        for top_p in (0.1, 0.9, 0.95, 0.999):
            got, want = _nucleus(probs, top_p), _sorted_nucleus(probs, top_p)
            assert set(got.tolist()) == set(want.tolist()), (logits.shape, top_p)
    assert len(_nucleus(torch.softmax(flat, -1), 0.95)) > max(NUCLEUS_FIRST)  # the fallback ran
    one = torch.zeros(10)
    one[3] = 50.0
    assert _nucleus(torch.softmax(one, -1), 0.5).tolist() == [3]  # the top token always


def test_draws_follow_the_renormalised_nucleus_and_a_seed_repeats_them():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(20_000, generator=g) * 3
    logits[:30] += 10
    p = SamplingParams(max_tokens=1, temperature=0.8, top_p=0.9)
    probs = torch.softmax(logits / 0.8, -1)
    idx = _nucleus(probs, 0.9)
    want = probs[idx] / probs[idx].sum()
    gen = make_generator(7)
    n = 20_000
    got = collections.Counter(sample(logits, p, gen) for _ in range(n))
    assert set(got) <= set(idx.tolist())  # nothing outside the nucleus
    for i, q in zip(idx.tolist(), want.tolist()):
        assert abs(got[i] / n - q) <= 4 * (q * (1 - q) / n) ** 0.5 + 1e-3, (i, q, got[i] / n)
    full = SamplingParams(max_tokens=1, temperature=1.0)  # no nucleus: the whole vocabulary
    small = torch.tensor([0.0, 1.0, 2.0, -1.0])
    counts = collections.Counter(sample(small, full, gen) for _ in range(n))
    for i, q in enumerate(torch.softmax(small, -1).tolist()):
        assert abs(counts[i] / n - q) <= 4 * (q * (1 - q) / n) ** 0.5, (i, q)
    a, b = make_generator(5), make_generator(5)
    assert [sample(logits, p, a) for _ in range(20)] == [sample(logits, p, b) for _ in range(20)]
