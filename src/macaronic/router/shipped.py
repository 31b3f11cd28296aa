"""The router state shipped with the specialists: where it lives, how it is rebuilt and loaded.

Each registered base can have its own: `specialists/router/` for SmolLM2-135M,
`specialists/<base>/router/` for the others (engine/bases.py). It holds the fitted state (state.json + one npz per policy, content-
addressed, bound to the base fingerprint and the adapter ids it was fitted with) and
`provenance.json` (the command, thread count and library versions that produced it; not part
of the id). `macaronic route fit` (scripts/fit_router) rebuilds it from the shipped routing data
at a fixed thread count; the same inputs give the same bytes; `route fit --adapters-only` refits only
what the specialists' weights give (the Arrow prototypes, their temperature, the band table) after a
specialist changes. Serving and `route classify` load
it as is and never fit: a state that does not match the backbone is refused with the reason.
"""

from __future__ import annotations

import contextlib
import json
import platform
from pathlib import Path

SHIPPED_DIR = Path(__file__).resolve().parent.parent / "specialists" / "router"  # SmolLM2-135M's
FIT_THREADS = 1


def shipped_dir(base: str | None = None) -> Path:
    """The shipped router state of a registered base (None: the default base)."""
    from macaronic.engine import bases

    return bases.specialists_dir(bases.get(base)) / "router"


def backbone_base(backbone) -> str | None:
    """The registered base a backbone runs on, or None (the default's state then applies and its
    binding check refuses it if the base differs)."""
    from macaronic.engine.bases import BASES

    name = getattr(getattr(backbone, "base", None), "name", None)
    return name if name in BASES else None


def routing_base(base: str | None) -> str | None:
    """The registered base whose backbone and shipped state route for `base`: itself when it ships
    a state, else its registry's `router_base` (None when neither applies)."""
    from macaronic.engine import bases

    if (shipped_dir(base) / "state.json").is_file():
        return base or bases.DEFAULT_BASE
    return bases.get(base).router_base


def load_shipped(backbone, bundle=None, config=None, path: str | Path | None = None):
    """The router on the shipped state of the backbone's base (or the given state); StateMismatch
    names what differs. A base without a state of its own routes with its `router_base`'s backbone
    (loaded here, at the backbone's precision, with that base's specialists: the Arrow prototypes
    come from them) and state."""
    from macaronic.router.router import Router

    root = Path(path) if path is not None else None
    name = backbone_base(backbone)
    if root is None and name is not None and routing_base(name) not in (None, name):
        from macaronic.engine.llm import load_default_llm

        other = routing_base(name)
        backbone = load_default_llm(backbone.config, base=other)
        root = shipped_dir(other)
    root = root if root is not None else shipped_dir(name)
    if not (root / "state.json").is_file():
        raise FileNotFoundError(f"no router state in {root}; build it with `macaronic route fit`")
    return Router.load(root, backbone, bundle, config)


def router_for(backbone, bundle, policy: str | None = None, state_dir: str | Path | None = None):
    """The bundle's router (its router.json, `policy` overriding the policy; "none": no router),
    on the shipped or given state when the policy needs one. Raises StateMismatch (a ValueError)
    or FileNotFoundError with the reason when that state cannot serve this backbone."""
    from dataclasses import replace

    from macaronic.router.config import RouterConfig
    from macaronic.router.router import Router

    if policy == "none":
        return None
    cfg = RouterConfig.from_dict(bundle.router)
    cfg = replace(cfg, policy=policy) if policy else cfg
    needs = {cfg.cheap_policy, *cfg.cascade_candidates} if cfg.policy == "cascade" else {cfg.policy}
    if not needs - {"prompted"}:
        return Router(backbone, bundle, config=cfg)
    return load_shipped(backbone, bundle, cfg, state_dir)


def fit_config(backbone, bundle):
    """The config a state for this backbone is fitted with: the bundle's router.json, with the
    registered base's `router_options` over it."""
    from macaronic.engine import bases
    from macaronic.router.config import RouterConfig

    name = backbone_base(backbone)
    options = dict(bases.get(name).router_options) if name is not None else {}
    return RouterConfig.from_dict({**bundle.router, **options})


@contextlib.contextmanager
def _torch_threads(n: int):
    """Fit at a fixed torch thread count (the same inputs give the same bytes), then restore it."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def fit_state(backbone, bundle=None, config=None, threads: int = FIT_THREADS, log=None,
              data: tuple[list[dict], list[dict]] | None = None, features=None, head_cache=None):
    """A router fitted on the shipped routing data (or `data` = (train, dev)), deterministically
    (fixed torch threads); `config` defaults to `fit_config`."""
    from macaronic.router.data import data_hash, router_fit_data
    from macaronic.router.router import Router

    if config is None:
        if bundle is None:
            from macaronic.harness import load_bundle

            bundle = load_bundle()
        config = fit_config(backbone, bundle)
    with _torch_threads(threads):
        train, dev = data or router_fit_data()
        if log:
            log(f"fitting on {len(train)} train / {len(dev)} dev turns at {threads} threads")
        return Router.fit(backbone, train, dev, bundle, config, features=features, head_cache=head_cache,
                          data_hash=data_hash(train, dev))


def _refit_inputs(state_dir, bundle, data):
    """(bundle, the saved state, train, dev) for refitting part of a state; refused when the routing
    data (default: the shipped data) changed since the state was fitted."""
    from macaronic.router.data import data_hash, router_fit_data
    from macaronic.router.state import RouterState

    if bundle is None:
        from macaronic.harness import load_bundle

        bundle = load_bundle()
    old = RouterState.load(state_dir)
    train, dev = data or router_fit_data()
    if old.binding.get("data") != data_hash(train, dev):
        raise ValueError(f"the routing data changed since {state_dir} was fitted: refit all of it (macaronic route fit)")
    return bundle, old, train, dev


def refit_adapter_parts(backbone, state_dir: str | Path, bundle=None, threads: int = FIT_THREADS, log=None,
                        features=None, head_cache=None, data: tuple[list[dict], list[dict]] | None = None):
    """The state at `state_dir` with only what is computed from the specialists' weights refitted for
    this backbone's adapters: the Arrow prototypes (from the adapter weights; the centre of the training
    features kept), their temperature and the cascade's band table (both on the dev turns). The head,
    probe, embedding and fast stage read the bare base and keep their bytes, so a changed specialist
    needs no full refit. Refused when the routing data (default: the shipped data; `data` = (train,
    dev)) changed since the state was fitted."""
    from macaronic.router.arrow import ArrowPolicy
    from macaronic.router.router import Router, training_pairs
    from macaronic.router.state import RouterState

    bundle, old, train, dev = _refit_inputs(state_dir, bundle, data)
    if old.arrow is None:
        raise ValueError(f"{state_dir} has no Arrow prototypes: nothing is computed from the specialists' weights")
    with _torch_threads(threads):
        router = Router(backbone, bundle, None, fit_config(backbone, bundle))
        dev_texts, dev_labels = training_pairs(dev)
        if log:
            log(f"refitting the adapter-derived parts on {len(dev)} dev turns at {threads} threads")
        Xd = router.embed(dev_texts, {} if features is None else features)
        arrow = ArrowPolicy.from_backbone(backbone, [a.name for a in router.adapters], Xd.shape[1],
                                          center=old.arrow.center).calibrate(Xd, dev_labels)
        kept = {k: getattr(old, k) for k in ("embedding", "probe", "head", "fast", "prefill")}
        router.state = RouterState(**kept, arrow=arrow)
        if old.bands is not None:
            router.state = RouterState(**kept, arrow=arrow, bands=router.fit_bands(
                dev_texts, dev_labels, features, {} if head_cache is None else head_cache))
        router.state = router.state.bind(backbone, old.binding.get("data"), old.binding.get("identity"))
        return router


def refit_prefill_part(backbone, state_dir: str | Path, bundle=None, threads: int = FIT_THREADS, log=None,
                       data: tuple[list[dict], list[dict]] | None = None):
    """The state at `state_dir` with its prefill head (the head on the answer's own prefill,
    `Router.fit_prefill`) fitted or refitted; every other part keeps its bytes, so the result is what
    a full refit gives. Refused when the routing data changed since the state was fitted, or when the
    state has no head (the prefill head reads the head's layer)."""
    from macaronic.router.router import Router
    from macaronic.router.state import RouterState, identity_hash

    bundle, old, train, dev = _refit_inputs(state_dir, bundle, data)
    if old.head is None:
        raise ValueError(f"{state_dir} has no head: the prefill head reads the head's layer")
    with _torch_threads(threads):
        router = Router(backbone, bundle, old, fit_config(backbone, bundle))  # its fast stage sets `fast_above`
        if log:
            log(f"fitting the prefill head on {len(train)} train / {len(dev)} dev turns at {threads} threads")
        prefill = router.fit_prefill(train, dev, old.head.layer)
        router.state = RouterState(**{k: getattr(old, k) for k in ("embedding", "probe", "head", "arrow", "bands",
                                                                   "fast")}, prefill=prefill)
        router.state = router.state.bind(backbone, old.binding.get("data"), identity_hash(bundle))
        return router


def write_shipped(router, out: str | Path, threads: int = FIT_THREADS, command: str = "macaronic route fit") -> str:
    import numpy
    import sklearn
    import torch

    out = Path(out)
    state_id = router.save(out)
    prov = {"state_id": state_id, "command": command, "torch_threads": threads,
            "torch": torch.__version__, "numpy": numpy.__version__, "sklearn": sklearn.__version__,
            "machine": platform.machine(),
            "bands": router.state.bands.rows() if router.state.bands is not None else None,
            "head": {"views": list(router.state.head.views), "c": router.state.head.c, "layer": router.state.head.layer}
            if router.state.head is not None else None}
    base = getattr(router.backbone, "base", None)
    if getattr(base, "precision", "float32") != "float32":
        prov["precision"] = base.precision  # the features were read at it (float32 when absent)
        if base.precision == "int4":  # and what int4's few-rows path rounds x to, as load_base chose it
            from macaronic.engine import bases

            prov["int4_x"] = bases.int4_x(Path(base.path).name)  # the name load_base asked it with
    if router.state.prefill is not None:
        prov["prefill"] = {"views": list(router.state.prefill.views), "c": router.state.prefill.c,
                           "layer": router.state.prefill.layer}
    if router.state.fast is not None:
        prov["fast"] = {"layer": router.state.fast.layer, "c": router.state.fast.c,
                        "exit_above": router.state.fast.exit_above}
    (out / "provenance.json").write_text(json.dumps(prov, indent=2, sort_keys=True) + "\n")
    return state_id
