"""Prompted policy: the chat adapter reads the route prompt and we read its label probabilities.

The prompt (from the harness bundle) lists each candidate's description and boundary rules and
quotes the request as untrusted data between <request> tags (tags inside the request are
escaped, so it cannot close the quote). The assistant turn is prefilled with `model_id=`.

Scoring, no sampling: each label is scored by the log-probability of its *shortest unique token
prefix* among the candidates, by teacher forcing. When every label starts with a different
token (the four roles) that is exactly first-token scoring: one prefill, one forward pass. When
labels share leading tokens (synthetic route names), the shared prefixes are fed once each and
the scores continue down the token trie until the labels diverge, so the scores are the
probability masses of disjoint branches and sum to at most 1. We renormalise over candidates.
The cost is one next_logprobs call per distinct shared prefix (1 for the shipped roles).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from macaronic.router.config import default_route as bundle_default
from macaronic.router.features import softmax
from macaronic.router.types import AdapterInfo, Backbone


def unique_prefix_lengths(seqs: list[tuple[int, ...]]) -> list[int]:
    """For each sequence, the shortest prefix length no other sequence shares (or its full
    length when it is itself a prefix of another)."""
    out = []
    for k, s in enumerate(seqs):
        m = 1
        while m < len(s) and any(j != k and t[:m] == s[:m] for j, t in enumerate(seqs)):
            m += 1
        out.append(min(m, len(s)))
    return out


@dataclass(frozen=True)
class PromptedPolicy:
    system_template: str
    user_template: str
    default_route: str  # router/config.py's default_route(bundle)
    route_adapter: str | None = "chat"  # scored with this adapter when the backbone has it
    prefill: str = "model_id="
    max_prompt_tokens: int = 1536  # past this, the boundary rules are dropped (compact listing)
    max_request_chars: int = 2000  # a longer request keeps its head and tail
    name: ClassVar[str] = "prompted"

    @classmethod
    def from_bundle(cls, bundle, default_route: str | None = None, route_adapter: str | None = "chat",
                    max_prompt_tokens: int = 1536):
        return cls(bundle.route_system, bundle.route_user, default_route or bundle_default(bundle), route_adapter,
                   max_prompt_tokens=max_prompt_tokens)

    def messages(self, request: str, adapters: list[AdapterInfo], rules: bool = True) -> list[dict]:
        lines = []
        for a in adapters:
            lines.append(f"- {a.name}: {a.description}".rstrip())
            lines += [f"    - {rule}" for rule in a.boundary] if rules else []
        n = self.max_request_chars
        if len(request) > n:
            request = request[: n * 3 // 4] + " [...] " + request[-(n // 4):]
        default = self.default_route if any(a.name == self.default_route for a in adapters) \
            else adapters[0].name
        quoted = request.replace("<request>", "&lt;request&gt;").replace("</request>", "&lt;/request&gt;")
        return [{"role": "system", "content": self.system_template.replace("{{adapters}}", "\n".join(lines))
                 .replace("{{default}}", default)},
                {"role": "user", "content": self.user_template.replace("{{request}}", quoted)}]

    def prompt_ids(self, backbone: Backbone, request: str, adapters: list[AdapterInfo]) -> list[int]:
        ids = list(backbone.encode_chat(self.messages(request, adapters), add_generation_prompt=True))
        if len(ids) > self.max_prompt_tokens:
            # Bounded route-hop cost (and tiny test models' short contexts): descriptions only.
            ids = list(backbone.encode_chat(self.messages(request, adapters, rules=False),
                                            add_generation_prompt=True))
        return ids + list(backbone.tokenizer.encode(self.prefill, add_special_tokens=False))

    def label_logprobs(self, backbone: Backbone, ids: list[int], labels: list[str]) -> np.ndarray:
        """[K] log-probability of each label's shortest unique prefix after `ids`."""
        adapter = self.route_adapter if self.route_adapter in backbone.adapters.names() else None
        seqs = [tuple(backbone.tokenizer.encode(l, add_special_tokens=False)) for l in labels]
        lengths = unique_prefix_lengths(seqs)
        cache: dict[tuple[int, ...], np.ndarray] = {}  # shared prefix -> next-token logprobs
        scores = np.zeros(len(labels))
        for k, (seq, m) in enumerate(zip(seqs, lengths)):
            for i in range(m):
                prefix = seq[:i]
                if prefix not in cache:
                    cache[prefix] = backbone.next_logprobs(ids + list(prefix), adapter=adapter) \
                        .detach().float().cpu().numpy()
                scores[k] += cache[prefix][seq[i]]
        return scores

    def predict_one(self, backbone: Backbone, request: str, adapters: list[AdapterInfo]) -> np.ndarray:
        ids = self.prompt_ids(backbone, request, adapters)
        return softmax(self.label_logprobs(backbone, ids, [a.name for a in adapters]))

    def predict(self, backbone: Backbone, texts: list[str],
                adapters: list[AdapterInfo]) -> tuple[np.ndarray, np.ndarray]:
        probs = np.stack([self.predict_one(backbone, t, adapters) for t in texts]) if texts \
            else np.zeros((0, len(adapters)))
        return probs, np.zeros(len(texts), bool)
