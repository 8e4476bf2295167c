"""Asset facts from a CycloneDX JSON BOM: ours (``gpuprov:`` properties) or another tool's.

Our BOMs carry every verdict (docs/bom-properties.md). Trivy, Syft and cdxgen BOMs carry file
or package components without verdicts: their GPU libraries are recognized by the scanner's
classifier table and their verdicts stay None, so integrity and provenance rules report that
the BOM cannot show them instead of passing.
"""

from __future__ import annotations

import json
import re
from typing import Any

from scanner import vocabulary as V
from scanner.detect.classifiers import CLASSIFIERS, classify_name, package_matches
from scanner.errors import ScannerError
from scanner.model import AssetKind
from scanner.policy.facts import (
    AssetFacts,
    FileFact,
    ImageTrustFacts,
    driver_version_of,
    parse_time,
)

_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
#: development, documentation and static packages are no runtime libraries (libcudnn9-dev-cuda-12)
_NOT_RUNTIME = re.compile(r"-(?:dev|devel|doc|static)(?:-|$)")
_CUDA_SUFFIX = re.compile(r"-cu(?:da-?)?(\d+)\b")
#: Other tools' properties naming a file's path and layer.
_PATH_PROPS = ("aquasecurity:trivy:FilePath", "syft:location:0:path")
_LAYER_PROPS = ("aquasecurity:trivy:LayerDigest", "syft:location:0:layerID")
_DIGEST_PROPS = ("aquasecurity:trivy:RepoDigest", "oci:image:RepoDigest")
_TRUST_PROPS = (V.IMAGE_SIGNER, V.SLSA_BUILD_LEVEL, V.IMAGE_SIGNATURE_REJECTED)


class BomError(ScannerError):
    """A document that is no CycloneDX JSON BOM we can gate."""


def _props(component: dict[str, Any]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for p in component.get("properties") or []:
        if isinstance(p, dict) and isinstance(p.get("name"), str):
            out.setdefault(p["name"], []).append(str(p.get("value", "")))
    return out


def _first(props: dict[str, list[str]], *names: str) -> str | None:
    for name in names:
        if props.get(name):
            return props[name][0]
    return None


def _sha256(component: dict[str, Any]) -> str | None:
    for h in component.get("hashes") or []:
        if isinstance(h, dict) and str(h.get("alg", "")).upper().replace("_", "-") == "SHA-256":
            content = str(h.get("content", "")).lower()
            if re.fullmatch(r"[0-9a-f]{64}", content):
                return content
    return None


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _ours(component: dict[str, Any], props: dict[str, list[str]]) -> FileFact:
    path = _first(props, V.FILE_PATH) or str(component.get("name", ""))
    family = _first(props, V.LIBRARY_FAMILY) or ""
    return FileFact(
        path=path,
        family=family,
        component=_first(props, V.LIBRARY_COMPONENT) or family,
        version=_first(props, V.LIBRARY_VERSION) or component.get("version") or None,
        cuda_major=_int(_first(props, V.LIBRARY_CUDA_MAJOR)),
        sha256=_sha256(component),
        layer=_first(props, V.LAYER),
        integrity=_first(props, V.INTEGRITY),
        integrity_reason=_first(props, V.INTEGRITY_REASON) or "",
        provenance=_first(props, V.PROVENANCE),
        provenance_signer=_first(props, V.PROVENANCE_SIGNER),
        provenance_reason=_first(props, V.PROVENANCE_REASON) or "",
        owner=_first(props, V.OWNER_PURL),
        **_loaded(props),
    )


def _loaded(props: dict[str, list[str]]) -> dict[str, Any]:
    """The FileFact fields of our ``gpuprov:runtime:`` properties (docs/bom-properties.md)."""
    processes: list[dict[str, Any]] = []
    for value in props.get(V.RUNTIME_PROCESS, []):
        try:
            item = json.loads(value)
        except (ValueError, RecursionError):
            continue
        if isinstance(item, dict) and isinstance(item.get("pid"), int):
            processes.append(item)
    containers = {p["container"] for p in processes if isinstance(p.get("container"), str)}
    disk = _first(props, V.RUNTIME_DISK_SHA256)
    return {
        "loaded_processes": len({p["pid"] for p in processes})
        or (_int(_first(props, V.RUNTIME_PROCESSES)) or 0),
        "loaded_containers": len(containers) or (_int(_first(props, V.RUNTIME_CONTAINERS)) or 0),
        "loaded_deleted": _first(props, V.RUNTIME_DELETED) == "true"
        or any(p.get("deleted") is True for p in processes),
        "loaded_copy": _first(props, V.RUNTIME_ON_DISK) == "false" or disk is not None,
        "disk_sha256": disk,
    }


def _foreign_file(component: dict[str, Any], props: dict[str, list[str]]) -> FileFact | None:
    path = _first(props, *_PATH_PROPS) or str(component.get("name", ""))
    match = classify_name(path.rsplit("/", 1)[-1])
    if match is None:
        return None
    suffix = match.suffix or ""
    # a complete version in the file name (libcudnn_ops.so.9.7.0); the bare ABI major is none
    version = suffix if suffix.count(".") >= 2 else None
    major = None
    if version and match.classifier.cuda_rule.value == "own":
        major = _int(version.split(".")[0])
    return FileFact(
        path=path if path.startswith("/") else "/" + path,
        family=match.classifier.family,
        component=match.component,
        version=version,
        cuda_major=major,
        sha256=_sha256(component),
        layer=_first(props, *_LAYER_PROPS),
    )


def _foreign_package(component: dict[str, Any], props: dict[str, list[str]]) -> FileFact | None:
    name = str(component.get("name", ""))
    purl = str(component.get("purl", ""))
    if not name or _NOT_RUNTIME.search(name):
        return None
    for classifier in CLASSIFIERS:
        if package_matches(classifier, name):
            suffix = _CUDA_SUFFIX.search(name) or _CUDA_SUFFIX.search(
                str(component.get("version", ""))
            )
            return FileFact(
                path=_first(props, *_PATH_PROPS) or purl or name,
                family=classifier.family,
                component=classifier.family,
                version=str(component.get("version") or "") or None,
                cuda_major=_int(suffix.group(1)) if suffix else None,
                sha256=_sha256(component),
                layer=_first(props, *_LAYER_PROPS),
            )
    return None


def _walk(components: list[Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for c in components:
        if isinstance(c, dict):
            out.append(c)
            out.extend(_walk(c.get("components") or []))
    return out


def _producer(metadata: dict[str, Any]) -> str:
    tools = metadata.get("tools")
    entries = tools.get("components", []) if isinstance(tools, dict) else tools or []
    for t in entries:
        if isinstance(t, dict) and t.get("name"):
            return f"{t['name']} {t.get('version', '')}".strip()
    return "unknown"


def facts_from_bom(raw: bytes) -> AssetFacts:
    """Asset facts from CycloneDX JSON bytes; raises BomError when it is no BOM."""
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise BomError(f"not a JSON document: {e}") from None
    if not isinstance(doc, dict) or doc.get("bomFormat") != "CycloneDX":
        raise BomError('not a CycloneDX JSON BOM (no "bomFormat": "CycloneDX")')
    metadata = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    assert isinstance(metadata, dict)
    asset = metadata.get("component") if isinstance(metadata.get("component"), dict) else {}
    assert isinstance(asset, dict)
    aprops = _props(asset)
    mprops = _props(metadata)
    ours = any(k.startswith(V.NS + ":") for k in aprops) or any(
        k.startswith(V.NS + ":") for c in _walk(doc.get("components") or []) for k in _props(c)
    )
    kind_prop = _first(aprops, V.ASSET_KIND)
    kind = (
        AssetKind(kind_prop)
        if kind_prop in ("host", "image")
        else AssetKind.IMAGE
        if asset.get("type") == "container"
        else AssetKind.HOST
    )
    digest = _first(aprops, V.IMAGE_DIGEST)
    for candidate in (
        str(asset.get("purl", "")).replace("%3A", ":").replace("%3a", ":"),
        str(asset.get("version", "")),
        _first(aprops, *_DIGEST_PROPS) or "",
        _first(mprops, *_DIGEST_PROPS) or "",
    ):
        if digest is None and (m := _DIGEST.search(candidate)):
            digest = m.group(0)
    if digest is None:
        digest = _first(aprops, V.IMAGE_ID, V.HOST_MACHINE_ID)
    files: list[FileFact] = []
    for component in _walk(doc.get("components") or []):
        props = _props(component)
        if V.LIBRARY_FAMILY in props:
            files.append(_ours(component, props))
        elif not ours:
            fact = (
                _foreign_file(component, props)
                if component.get("type") == "file"
                else _foreign_package(component, props)
            )
            if fact is not None:
                files.append(fact)
    trust = None
    if any(p in aprops for p in _TRUST_PROPS):
        trust = ImageTrustFacts(
            signer=_first(aprops, V.IMAGE_SIGNER),
            slsa_level=_int(_first(aprops, V.SLSA_BUILD_LEVEL)),
            builder=_first(aprops, V.SLSA_BUILDER),
            rejected=tuple(aprops.get(V.IMAGE_SIGNATURE_REJECTED, [])),
        )
    findings = tuple(
        (kind_msg[0].strip(), kind_msg[1].strip())
        for f in mprops.get(V.SCAN_FINDING, [])
        if len(kind_msg := f.split(":", 1)) == 2
    )
    labels = tuple(
        sorted(
            (k.removeprefix(V.ASSET_LABEL_PREFIX), v[0])
            for k, v in aprops.items()
            if k.startswith(V.ASSET_LABEL_PREFIX)
        )
    )
    all_files = tuple(files)
    unread_procs = _int(_first(aprops, V.RUNTIME_UNREADABLE)) or 0
    unread_maps = _int(_first(aprops, V.RUNTIME_UNREADABLE_MAPPINGS)) or 0
    unreadable = tuple(
        text
        for count, text in (
            (unread_procs, f"the memory maps of {unread_procs} process(es)"),
            (unread_maps, f"the loaded bytes of {unread_maps} mapping(s)"),
        )
        if count
    )
    return AssetFacts(
        kind=kind,
        name=_first(aprops, V.HOST_HOSTNAME) or str(asset.get("name") or "unnamed"),
        digest=digest,
        scanned_at=parse_time(metadata.get("timestamp")),
        files=all_files,
        labels=labels,
        image_trust=trust,
        driver_version=_first(aprops, V.DRIVER_VERSION)
        or (None if V.L4T_RELEASE in aprops else driver_version_of(all_files)),
        driver_cuda_max=_first(aprops, V.DRIVER_CUDA_MAX),
        findings=findings,
        producer=_producer(metadata) if not ours else f"gpuprov ({_producer(metadata)})",
        runtime=V.RUNTIME_PROC in aprops,
        runtime_unreadable=unreadable,
    )
