"""What the NVIDIA Container Toolkit injects into containers: CDI specs and the legacy list.

CDI (Container Device Interface, github.com/cncf-tags/container-device-interface, SPEC.md) specs
live in ``/etc/cdi`` and ``/var/run/cdi`` as YAML or JSON. ``nvidia-ctk cdi generate`` writes
one with ``cdiVersion``, ``kind: nvidia.com/gpu``, ``devices[]`` (``name``: "0", a GPU UUID,
"all"; each with ``containerEdits``) and spec-wide ``containerEdits``: ``deviceNodes[].path``,
``mounts[]`` (``hostPath``, ``containerPath``, ``options``) and ``hooks[]`` whose
``create-symlinks`` hook names links as ``--link TARGET::LINK``. Spec-wide edits apply to every
device of the kind (reported as ``KIND=*``). The legacy ``nvidia-container-cli list`` prints
one absolute host path per line (device nodes, binaries, libraries, IPC sockets, firmware).
Parsing is pure; errors are `CdiError` with the reason.
"""

from __future__ import annotations

from typing import Any, Final

from msgspec import Struct, field

#: The directories CDI reads specs from (SPEC.md, "Spec directories"), in priority order.
SPEC_DIRS: Final = ("/etc/cdi", "/var/run/cdi")
SPEC_SUFFIXES: Final = (".yaml", ".yml", ".json")
LEGACY_SOURCE: Final = "nvidia-container-cli list"


class CdiError(ValueError):
    """A CDI spec or list that cannot be read; the message says why."""


class Injection(Struct):
    """What one spec (or list) gives containers, before the host files are hashed."""

    source: str
    #: the spec's device kind ("nvidia.com/gpu"); empty for the legacy list
    kind: str = ""
    #: host path -> (container paths, devices)
    mounts: dict[str, tuple[set[str], set[str]]] = field(default_factory=dict)
    device_nodes: set[str] = field(default_factory=set)
    links: set[tuple[str, str]] = field(default_factory=set)

    def mount(self, host: str, container: str | None, device: str) -> None:
        paths, devices = self.mounts.setdefault(host, (set(), set()))
        if container:
            paths.add(container)
        if device:
            devices.add(device)


def _str(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise CdiError(f"{where}: expected a non-empty string, got {value!r}")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise CdiError(f"{where}: expected a list, got {type(value).__name__}")
    return value


def _links(args: list[Any]) -> list[tuple[str, str]]:
    """The (link, target) pairs of a create-symlinks hook's arguments."""
    out: list[tuple[str, str]] = []
    words = [a for a in args if isinstance(a, str)]
    if "create-symlinks" not in words:
        return out
    for i, word in enumerate(words):
        spec = None
        if word == "--link" and i + 1 < len(words):
            spec = words[i + 1]
        elif word.startswith("--link="):
            spec = word.removeprefix("--link=")
        if spec and "::" in spec:
            target, _, link = spec.partition("::")
            if target and link:
                out.append((link, target))
    return out


def _edits(edits: Any, where: str, device: str, out: Injection) -> None:
    if edits is None:
        return
    if not isinstance(edits, dict):
        raise CdiError(f"{where}: containerEdits must be a mapping")
    for i, node in enumerate(_list(edits.get("deviceNodes"), f"{where}.deviceNodes")):
        if not isinstance(node, dict):
            raise CdiError(f"{where}.deviceNodes[{i}]: not a mapping")
        out.device_nodes.add(_str(node.get("hostPath") or node.get("path"), f"{where}.path"))
    for i, mount in enumerate(_list(edits.get("mounts"), f"{where}.mounts")):
        at = f"{where}.mounts[{i}]"
        if not isinstance(mount, dict):
            raise CdiError(f"{at}: not a mapping")
        host = _str(mount.get("hostPath"), f"{at}.hostPath")
        container = _str(mount.get("containerPath"), f"{at}.containerPath")
        if not host.startswith("/"):
            raise CdiError(f"{at}.hostPath: {host!r} is no absolute path")
        out.mount(host, container, device)
    for i, hook in enumerate(_list(edits.get("hooks"), f"{where}.hooks")):
        if not isinstance(hook, dict):
            raise CdiError(f"{where}.hooks[{i}]: not a mapping")
        out.links.update(_links(_list(hook.get("args"), f"{where}.hooks[{i}].args")))


def parse_spec(text: str, source: str) -> Injection:
    """One CDI spec (YAML or JSON: JSON is YAML) as what it injects; raises CdiError."""
    from scanner.loaders import DocumentError, load_json, load_yaml

    try:
        doc = load_json(text) if text.lstrip().startswith("{") else load_yaml(text)
    except DocumentError as e:
        raise CdiError(f"not YAML or JSON: {e}") from None
    if not isinstance(doc, dict):
        raise CdiError("not a CDI spec (no mapping)")
    _str(doc.get("cdiVersion"), "cdiVersion")
    kind = _str(doc.get("kind"), "kind")
    if "/" not in kind:
        raise CdiError(f"kind {kind!r} is not vendor/class (e.g. nvidia.com/gpu)")
    out = Injection(source, kind=kind)
    _edits(doc.get("containerEdits"), "containerEdits", f"{kind}=*", out)
    for i, dev in enumerate(_list(doc.get("devices"), "devices")):
        if not isinstance(dev, dict):
            raise CdiError(f"devices[{i}]: not a mapping")
        name = _str(dev.get("name"), f"devices[{i}].name")
        _edits(dev.get("containerEdits"), f"devices[{i}].containerEdits", f"{kind}={name}", out)
    return out


def parse_legacy_list(text: str, source: str = LEGACY_SOURCE) -> Injection:
    """``nvidia-container-cli list`` output: one absolute host path a line; raises CdiError
    when a line is no absolute path (so another file given by mistake is not half-read)."""
    out = Injection(source)
    for n, line in enumerate(text.splitlines(), 1):
        path = line.strip()
        if not path:
            continue
        if not path.startswith("/") or "\x00" in path:
            raise CdiError(f"line {n}: {path[:80]!r} is no absolute path")
        if path.startswith("/dev/"):
            out.device_nodes.add(path)
        else:
            out.mount(path, None, "")
    return out
