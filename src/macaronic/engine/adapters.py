"""PEFT LoRA adapter directories: read, validate, identify.

An adapter is a directory with `adapter_config.json` and `adapter_model.safetensors` (the layout
PEFT, vLLM and SGLang load) and optionally `macaronic.json` (role, mode, base fingerprint). The
reader checks every key, shape and dtype against the base's shapes and reports all problems at
once. It knows nothing about slots, batching or the registry.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file

from macaronic.engine.bases import PACKAGE
from macaronic.engine.config import TARGETS, ModelArgs

MODES = ("full", "turn", "upper")
# Where a turn-mode adapter switches on inside its turn: at the latest user message's header (the
# user turn's K/V are the adapter's), or at the reply's assistant header (PEFT aLoRA's own
# invocation point: the user turn's K/V are the bare base's, so adapters answering behind the same
# prefix share them).
ACTIVATIONS = ("user", "assistant")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
KEY_RE = re.compile(
    r"^(?:base_model\.model\.)?model\.layers\.(\d+)\.(?:self_attn|mlp)\.(\w+)\.lora_([AB])(?:\.default)?\.weight$"
)
FLOAT_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


class AdapterError(ValueError):
    """An adapter that cannot be used; the message names the file and lists every problem."""


@dataclass(frozen=True)
class AdapterInfo:
    name: str
    id: str  # sha256 of the directory's files
    path: str
    rank: int
    alpha: float
    scaling: float
    targets: tuple[str, ...]
    layers: tuple[int, ...]
    mode: str  # "full", "turn" or "upper"
    role: str | None = None
    description: str = ""
    base_fingerprint: str | None = None
    invocation_tokens: tuple[int, ...] | None = None
    top_k: int | None = None  # upper: LoRA in the top top_k layers only
    activation: str = "user"  # turn: the header it switches on at, "user" or "assistant" (ACTIVATIONS)
    meta: dict = field(default_factory=dict, compare=False, hash=False)
    stamp: str = field(default="", compare=False)  # size and mtime of the files when validated

    def public(self) -> dict:
        return {"name": self.name, "id": self.id, "rank": self.rank, "targets": list(self.targets),
                "mode": self.mode, "role": self.role, **({"top_k": self.top_k} if self.mode == "upper" else {}),
                **({"activation": self.activation} if self.activation != "user" else {})}


def check_name(name: str) -> str:
    if not isinstance(name, str) or not NAME_RE.match(name) or ".." in name:
        raise AdapterError(
            f"invalid adapter name {name!r}: use letters, digits, '.', '_' or '-' (at most 64), no path parts"
        )
    return name


RECORDED_DATA = PACKAGE / "specialists" / "data"


def recorded_data(path: str | Path) -> Path | None:
    """The file an adapter directory was trained on, where it can be had: the directory's own
    data.jsonl (what `macaronic train` writes), else the package's content-addressed copy,
    `specialists/data/<sha256>.jsonl`, named by the sha256 its macaronic.json records
    (`data.manifest_sha256`). A shipped adapter keeps its data there, not in its directory, because
    every file of the directory is part of its id (`dir_sha256`) and so of every pair's. None when
    neither is there."""
    own = Path(path) / "data.jsonl"
    if own.is_file():
        return own
    try:
        meta = json.loads((Path(path) / "macaronic.json").read_text())
    except (OSError, ValueError):
        return None
    sha = ((meta.get("data") or {}) if isinstance(meta, dict) else {}).get("manifest_sha256")
    copy = RECORDED_DATA / f"{sha}.jsonl" if isinstance(sha, str) and re.fullmatch(r"[0-9a-f]{64}", sha) else None
    return copy if copy is not None and copy.is_file() else None


def dir_sha256(path: Path) -> str:
    """Content id of an adapter directory: sha256 over (relative path, bytes) of its files."""
    h = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        rel = f.relative_to(path).as_posix()
        if rel.startswith(".") or "__pycache__" in rel or rel.startswith("checkpoint"):
            continue
        h.update(rel.encode() + b"\0")
        with f.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        h.update(b"\0")
    return h.hexdigest()


def files_stamp(path: Path) -> str:
    """Size and mtime of an adapter's config and weights: unchanged means still as validated."""
    parts = []
    for f in ("adapter_config.json", "adapter_model.safetensors", "macaronic.json"):
        try:
            st = (path / f).stat()
            parts.append(f"{f}:{st.st_size}:{st.st_mtime_ns}")
        except FileNotFoundError:
            parts.append(f"{f}:-")
    return "|".join(parts)


def load_pairs(info: AdapterInfo, args: ModelArgs) -> dict[tuple[int, str], tuple[torch.Tensor, torch.Tensor]]:
    """The (A, scaled B) tensors of a registered adapter, as `read_adapter` returns them.

    Fast path for loading into a slot: if the files are as they were when the adapter was validated
    (same size and mtime), read the weights in one pass without validating or hashing again.
    Otherwise validate from scratch, and refuse if the content changed since registration.
    """
    path = Path(info.path)
    if not info.stamp or files_stamp(path) != info.stamp:
        new, pairs = read_adapter(path, args, name=info.name)
        if new.id != info.id:
            raise AdapterError(f"adapter {info.name!r} changed on disk since it was registered ({path}); register it again")
        return pairs
    try:
        tensors = load_file(str(path / "adapter_model.safetensors"))
    except Exception as e:
        raise AdapterError(f"adapter {info.name!r}: cannot read {path / 'adapter_model.safetensors'} ({e})") from None
    ab: dict[tuple[int, str], dict[str, torch.Tensor]] = {}
    for key, t in tensors.items():
        m = KEY_RE.match(key)
        ab.setdefault((int(m.group(1)), m.group(2)), {})[m.group(3)] = t
    return {k: (v["A"].float(), v["B"].float() * info.scaling) for k, v in ab.items()}


def _read_json(path: Path, problems: list[str]) -> dict:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        problems.append(f"{path}: missing")
        return {}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        problems.append(f"{path}: not valid JSON ({e})")
        return {}
    if not isinstance(data, dict):
        problems.append(f"{path}: expected a JSON object")
        return {}
    return data


def read_adapter(
    path: str | Path,
    args: ModelArgs,
    name: str | None = None,
    base_fingerprint: str | None = None,
    load_tensors: bool = True,
) -> tuple[AdapterInfo, dict[tuple[int, str], tuple[torch.Tensor, torch.Tensor]]]:
    """Validate an adapter directory and return its info and {(layer, target): (A, B*scaling)}.

    A: [r, d_in], B: [d_out, r], float32. Raises AdapterError listing every problem found.
    """
    path = Path(path)
    name = check_name(name or path.name)
    if not path.is_dir():
        raise AdapterError(f"adapter {name!r}: {path} is not a directory")
    stamp = files_stamp(path)
    problems: list[str] = []
    cfg_path, st_path = path / "adapter_config.json", path / "adapter_model.safetensors"
    cfg = _read_json(cfg_path, problems)
    meta = _read_json(path / "macaronic.json", []) if (path / "macaronic.json").exists() else {}
    if not st_path.exists():
        hint = " (pickled adapter_model.bin is not loaded: convert it to safetensors)" if (path / "adapter_model.bin").exists() else ""
        problems.append(f"{st_path}: missing{hint}")

    rank = cfg.get("r")
    alpha = cfg.get("lora_alpha", rank)
    if cfg:
        if cfg.get("peft_type", "LORA") != "LORA":
            problems.append(f"{cfg_path}: peft_type {cfg.get('peft_type')!r} is not LORA")
        if not isinstance(rank, int) or rank <= 0:
            problems.append(f"{cfg_path}: r must be a positive integer, got {rank!r}")
        if not isinstance(alpha, (int, float)):
            problems.append(f"{cfg_path}: lora_alpha must be a number, got {alpha!r}")
        for key in ("rank_pattern", "alpha_pattern"):
            if cfg.get(key):
                problems.append(f"{cfg_path}: {key} is not supported (one rank per adapter)")
        if cfg.get("use_dora"):
            problems.append(f"{cfg_path}: DoRA adapters are not supported")
    mode = meta.get("mode") or ("turn" if cfg.get("alora_invocation_tokens") else "full")
    if mode not in MODES:
        problems.append(f"{path / 'macaronic.json'}: mode {mode!r} not in {MODES}")
    top_k = meta.get("top_k")
    if mode == "upper" and cfg.get("alora_invocation_tokens"):
        problems.append(f"{cfg_path}: alora_invocation_tokens (a turn-mode adapter) but macaronic.json says mode 'upper'")
    if mode == "upper" and not (isinstance(top_k, int) and 0 < top_k <= args.n_layers):
        problems.append(f"{path / 'macaronic.json'}: mode 'upper' needs top_k, an integer in [1, {args.n_layers}] "
                        f"(this base's layers), got {top_k!r}")
    elif mode != "upper" and top_k is not None:
        problems.append(f"{path / 'macaronic.json'}: top_k {top_k!r} is for mode 'upper', this adapter is {mode!r}")
    activation = meta.get("activation", "user")
    if activation not in ACTIVATIONS:
        problems.append(f"{path / 'macaronic.json'}: activation {activation!r} not in {ACTIVATIONS}")
    elif activation != "user" and mode != "turn":
        problems.append(f"{path / 'macaronic.json'}: activation {activation!r} is for mode 'turn', this adapter is {mode!r}")
    fp = meta.get("base_fingerprint")
    if base_fingerprint and fp and fp != base_fingerprint:
        problems.append(
            f"{path / 'macaronic.json'}: trained for base {fp[:12]}…, this base is {base_fingerprint[:12]}…"
        )

    weights: dict[tuple[int, str], dict[str, torch.Tensor]] = {}
    if st_path.exists():
        try:
            everything = load_file(str(st_path)) if load_tensors else {}  # one read, not one per tensor
            with safe_open(str(st_path), framework="pt") as f:
                for key in f.keys():
                    m = KEY_RE.match(key)
                    if not m:
                        problems.append(f"{st_path}: unexpected tensor {key}")
                        continue
                    layer, target, ab = int(m.group(1)), m.group(2), m.group(3)
                    if target not in TARGETS:
                        problems.append(f"{st_path}: {key}: unknown target {target!r}")
                        continue
                    if layer >= args.n_layers:
                        problems.append(f"{st_path}: {key}: layer {layer} >= base layers {args.n_layers}")
                        continue
                    sl = f.get_slice(key)
                    dtype, shape = sl.get_dtype(), tuple(sl.get_shape())
                    if dtype not in FLOAT_DTYPES:
                        problems.append(f"{st_path}: {key}: dtype {dtype} (want F32, F16 or BF16)")
                        continue
                    d_in, d_out = args.target_shape(target)
                    want = (rank, d_in) if ab == "A" else (d_out, rank)
                    if isinstance(rank, int) and shape != want:
                        problems.append(f"{st_path}: {key}: shape {shape}, expected {want} for this base")
                        continue
                    if load_tensors:
                        t = everything[key].float()
                        if not torch.isfinite(t).all():
                            problems.append(f"{st_path}: {key}: contains NaN or Inf")
                            continue
                        weights.setdefault((layer, target), {})[ab] = t
                    else:
                        weights.setdefault((layer, target), {})[ab] = None
        except AdapterError:
            raise
        except Exception as e:  # safetensors raises several types on truncated/corrupt files
            problems.append(f"{st_path}: unreadable safetensors file ({type(e).__name__}: {e})")
    for (layer, target), ab in sorted(weights.items()):
        if set(ab) != {"A", "B"}:
            problems.append(f"{st_path}: layer {layer} {target}: lora_A and lora_B must both be present")
    if mode == "upper" and isinstance(top_k, int) and 0 < top_k <= args.n_layers:
        low = sorted({layer for layer, _ in weights if layer < args.n_layers - top_k})
        if low:
            problems.append(f"{st_path}: mode 'upper' with top_k {top_k} allows LoRA in layers "
                            f"{args.n_layers - top_k}..{args.n_layers - 1} only; found layers {low}")
    if not weights and st_path.exists() and not problems:
        problems.append(f"{st_path}: holds no LoRA tensors")
    if problems:
        raise AdapterError(f"adapter {name!r} at {path} is invalid:\n  " + "\n  ".join(problems))

    scaling = alpha / math.sqrt(rank) if cfg.get("use_rslora") else alpha / rank
    pairs = {k: (v["A"], v["B"] * scaling if v["B"] is not None else None) for k, v in weights.items()}
    inv = cfg.get("alora_invocation_tokens")
    info = AdapterInfo(
        name=name,
        id=dir_sha256(path),
        path=str(path.resolve()),
        rank=rank,
        alpha=float(alpha),
        scaling=float(scaling),
        targets=tuple(t for t in TARGETS if any(k[1] == t for k in pairs)),
        layers=tuple(sorted({k[0] for k in pairs})),
        mode=mode,
        role=meta.get("role"),
        description=meta.get("description", ""),
        base_fingerprint=fp,
        invocation_tokens=tuple(inv) if inv else None,
        top_k=top_k if mode == "upper" else None,
        activation=activation,
        meta=meta,
        stamp=stamp,
    )
    return info, pairs


def save_adapter(
    path: str | Path,
    pairs: dict[tuple[int, str], tuple[torch.Tensor, torch.Tensor]],
    rank: int,
    alpha: float,
    meta: dict | None = None,
    dtype: torch.dtype = torch.float32,
    invocation_tokens: list[int] | None = None,
) -> Path:
    """Write a PEFT LoRA directory from {(layer, target): (A [r, d_in], B [d_out, r])} (B unscaled)."""
    from safetensors.torch import save_file

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    tensors = {}
    for (layer, target), (A, B) in sorted(pairs.items()):
        kind = "mlp" if target in ("gate_proj", "up_proj", "down_proj") else "self_attn"
        pre = f"base_model.model.model.layers.{layer}.{kind}.{target}"
        tensors[f"{pre}.lora_A.weight"] = A.detach().to(dtype).contiguous()
        tensors[f"{pre}.lora_B.weight"] = B.detach().to(dtype).contiguous()
    save_file(tensors, str(path / "adapter_model.safetensors"))
    cfg = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "r": rank,
        "lora_alpha": alpha,
        "lora_dropout": 0.0,
        "bias": "none",
        "target_modules": sorted({t for _, t in pairs}),
        "layers_to_transform": sorted({layer for layer, _ in pairs}),
        "use_rslora": False,
        "fan_in_fan_out": False,
    }
    if invocation_tokens:
        cfg["alora_invocation_tokens"] = list(invocation_tokens)
    (path / "adapter_config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    if meta is not None:
        (path / "macaronic.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return path
