"""The harness bundle: a versioned directory of text/JSON files that shapes every hop.

A bundle holds the identity prompt, one file per role (description, boundary rules, system
prompt), the route prompt, the summary prompt, decoding parameters and the router config.
Adding a specialist means adding `roles/<name>.md`; no code changes. The bundle's identity is
the sha256 of its canonical content, so two directories with the same files have the same id
whatever their mtimes or listing order. This module knows nothing about models or routing.

Layout (all paths relative to the bundle root):

    bundle.json           {"name", "version", "description"}
    identity.md           who the assistant is
    roles/<name>.md       front matter (name, alias, order, description) + "## Boundary rules"
                          bullets + "## System prompt"
    route/system.md       route prompt; {{adapters}} and {{default}} are filled in
    route/user.md         the quoted request; {{request}} is filled in
    summary.md            hidden-summary instruction
    decoding.json         {"route": {...}, "summary": {...}, "roles": {name: {...}}}
    router.json           router config (see macaronic.router.config.RouterConfig)
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_BUNDLE = Path(__file__).parent / "default"
# bundle.json "tool_listing": "compact" (one line per tool: names and `?` for optional arguments)
# or "typed" (every argument on its own line with its type, enum values and description).
TOOL_LISTINGS = ("compact", "typed")
REQUIRED_FILES = ("bundle.json", "identity.md", "route/system.md", "route/user.md", "summary.md",
                  "decoding.json", "router.json")


class BundleError(ValueError):
    """Every problem found in a bundle directory, reported at once."""

    def __init__(self, path: Path, errors: list[str]):
        self.errors = errors
        super().__init__(f"invalid harness bundle {path}:\n" + "\n".join(f"  - {e}" for e in errors))


@dataclass(frozen=True)
class RoleSpec:
    name: str
    alias: str
    order: int
    description: str
    boundary: tuple[str, ...]
    system_prompt: str
    # "base": served without its own adapter, the role adds no instruction, so its turns are the bare
    # base's (the do-no-harm rule: an instruction measured worse than none is not shipped on its own).
    # "instruction" (default): the instruction stays (it carries an output format or a tool protocol).
    without_adapter: str = "instruction"


@dataclass(frozen=True)
class HarnessBundle:
    path: Path
    id: str
    name: str
    version: str
    identity: str
    roles: tuple[RoleSpec, ...]
    route_system: str
    route_user: str
    summary_prompt: str
    decoding: dict[str, Any] = field(hash=False)
    router: dict[str, Any] = field(hash=False)
    files: tuple[str, ...] = ()
    tool_listing: str = "compact"  # how a request's tools are shown: TOOL_LISTINGS, `macaronic.prompts.tool_prompt`

    @property
    def role_names(self) -> list[str]:
        return [r.name for r in self.roles]

    def role(self, name_or_alias: str) -> RoleSpec:
        for r in self.roles:
            if name_or_alias in (r.name, r.alias):
                return r
        raise KeyError(f"no role {name_or_alias!r} in bundle {self.name} (have {self.role_names})")

    def system_prompt(self, role: str) -> str:
        """Identity first, then the role's own instructions."""
        return f"{self.identity.strip()}\n\n{self.role(role).system_prompt.strip()}"

    def served(self, adapter_roles, assistant_roles=()) -> "HarnessBundle":
        """The bundle as a pair serving adapters for `adapter_roles` renders it: a role marked
        `without_adapter: base` that has no adapter there adds no instruction, and neither does a role
        in `assistant_roles`, whose adapter switches on at the assistant header (an Activated LoRA
        carries its role itself; the user turn before it is then the bare base's in every role, one
        prefill the router can read). Same id: the pair id names the adapters, so bundle + adapters
        still fix the behaviour."""
        import dataclasses

        have, at_answer = set(adapter_roles), set(assistant_roles)
        bare = {r.name for r in self.roles if (r.without_adapter == "base" and r.name not in have) or r.name in at_answer}
        if not bare:
            return self
        roles = tuple(dataclasses.replace(r, system_prompt="") if r.name in bare else r for r in self.roles)
        return dataclasses.replace(self, roles=roles)

    def decoding_for(self, role: str) -> dict[str, Any]:
        return dict(self.decoding.get("roles", {}).get(self.role(role).name, {}))


def _normalize(data: bytes) -> bytes:
    # Newline style must not change the id (a checkout on Windows is the same bundle).
    return data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")


def bundle_files(root: Path) -> list[str]:
    """Relative posix paths of the bundle's content files, sorted; hidden and cache files skipped."""
    out = []
    for p in root.rglob("*"):
        rel = p.relative_to(root)
        if not p.is_file() or any(part.startswith(".") or part == "__pycache__" for part in rel.parts):
            continue
        out.append(rel.as_posix())
    return sorted(out)


def bundle_hash(root: str | Path) -> str:
    """sha256 over (path, length, normalized bytes) of every file in sorted path order."""
    root = Path(root)
    h = hashlib.sha256()
    for rel in bundle_files(root):
        data = _normalize((root / rel).read_bytes())
        # Lengths make the framing unambiguous: no two file sets share a byte stream.
        h.update(f"{len(rel)}:{rel}:{len(data)}:".encode())
        h.update(data)
    return h.hexdigest()


def parse_role(text: str, where: str, errors: list[str]) -> RoleSpec | None:
    """Parse a role file: `---` front matter of `key: value` lines, then `## ` sections."""
    text = text.replace("\r\n", "\n")
    if not text.startswith("---\n") or "\n---\n" not in text[4:]:
        errors.append(f"{where}: missing '---' front matter")
        return None
    head, body = text[4:].split("\n---\n", 1)
    meta: dict[str, str] = {}
    for line in head.splitlines():
        if line.strip():
            key, sep, value = line.partition(":")
            if not sep:
                errors.append(f"{where}: front matter line without ':': {line!r}")
                continue
            meta[key.strip()] = value.strip()
    sections: dict[str, list[str]] = {}
    current = None
    for line in body.splitlines():
        if line.startswith("## "):
            current = line[3:].strip().lower()
            sections[current] = []
        elif current is not None:
            sections[current].append(line)
    n_before = len(errors)
    for key in ("name", "alias", "order", "description"):
        if not meta.get(key):
            errors.append(f"{where}: front matter lacks {key!r}")
    for sec in ("boundary rules", "system prompt"):
        if sec not in sections:
            errors.append(f"{where}: missing section '## {sec.capitalize()}'")
    without = meta.get("without_adapter", "instruction")
    if without not in ("instruction", "base"):
        errors.append(f"{where}: without_adapter must be 'instruction' or 'base', got {without!r}")
    order = meta.get("order", "")
    if order and not order.lstrip("-").isdigit():
        errors.append(f"{where}: order must be an integer, got {order!r}")
    if len(errors) > n_before:
        return None
    rules = tuple(l.strip()[2:].strip() for l in sections["boundary rules"] if l.strip().startswith("- "))
    if not rules:
        errors.append(f"{where}: boundary rules need at least one '- ' bullet")
    return RoleSpec(name=meta["name"], alias=meta["alias"], order=int(order),
                    description=meta["description"], boundary=rules,
                    system_prompt="\n".join(sections["system prompt"]).strip(), without_adapter=without)


def load_bundle(path: str | Path | None = None) -> HarnessBundle:
    """Load and validate a bundle directory (default: the one shipped in the package)."""
    root = Path(path) if path is not None else DEFAULT_BUNDLE
    errors: list[str] = []
    if not root.is_dir():
        raise BundleError(root, [f"{root} is not a directory"])
    texts: dict[str, str] = {}
    for rel in REQUIRED_FILES:
        p = root / rel
        if not p.is_file():
            errors.append(f"missing {rel}")
        else:
            texts[rel] = p.read_text(encoding="utf-8").replace("\r\n", "\n")
    jsons: dict[str, Any] = {}
    for rel in ("bundle.json", "decoding.json", "router.json"):
        if rel in texts:
            try:
                jsons[rel] = json.loads(texts[rel])
            except json.JSONDecodeError as e:
                errors.append(f"{rel}: invalid JSON ({e})")
    roles = []
    for p in sorted((root / "roles").glob("*.md")):
        role = parse_role(p.read_text(encoding="utf-8"), f"roles/{p.name}", errors)
        if role is not None:
            if role.name != p.stem:
                errors.append(f"roles/{p.name}: name {role.name!r} does not match the file name")
            roles.append(role)
    if not roles and not any(e.startswith("roles/") for e in errors):
        errors.append("no roles/*.md files")
    names = [r.name for r in roles] + [r.alias for r in roles]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        errors.append(f"duplicate role names or aliases: {dupes}")
    if "route/system.md" in texts and "{{adapters}}" not in texts["route/system.md"]:
        errors.append("route/system.md must contain {{adapters}}")
    if "route/user.md" in texts and "{{request}}" not in texts["route/user.md"]:
        errors.append("route/user.md must contain {{request}}")
    meta = jsons.get("bundle.json", {})
    for key in ("name", "version"):
        if "bundle.json" in jsons and key not in meta:
            errors.append(f"bundle.json lacks {key!r}")
    listing = meta.get("tool_listing", "compact")
    if listing not in TOOL_LISTINGS:
        errors.append(f"bundle.json: tool_listing must be one of {sorted(TOOL_LISTINGS)}, got {listing!r}")
    router = jsons.get("router.json", {})
    default = router.get("default_route")
    if roles and default is not None and default not in names:
        errors.append(f"router.json: default_route {default!r} is not a role")
    for role_name in jsons.get("decoding.json", {}).get("roles", {}):
        if roles and role_name not in names:
            errors.append(f"decoding.json: unknown role {role_name!r}")
    if errors:
        raise BundleError(root, errors)
    return HarnessBundle(
        path=root, id=bundle_hash(root), name=meta["name"], version=str(meta["version"]),
        identity=texts["identity.md"], roles=tuple(sorted(roles, key=lambda r: (r.order, r.name))),
        route_system=texts["route/system.md"], route_user=texts["route/user.md"],
        summary_prompt=texts["summary.md"], decoding=jsons["decoding.json"], router=router,
        files=tuple(bundle_files(root)), tool_listing=listing)
