"""Which products that NVIDIA's bulletins name are present in a scanned root, at which version.

Runs after identification: it weighs what the scan already holds (CUDA version files, every
package of the root's databases, the tool binaries' embedded version texts, the identified
libraries, the node's driver) against the product table (`scanner.detect.products`) and returns
one `Product` per (product, version). Nothing here reads a file.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from msgspec.structs import replace

from scanner.detect.context import ToolkitVersion
from scanner.detect.products import (
    LABELS,
    ToolRow,
    cpes,
    package_product,
    product_row,
    tool_of,
)
from scanner.model import (
    Confidence,
    Evidence,
    EvidenceField,
    EvidenceMethod,
    FileFacts,
    FileRef,
    GpuLibrary,
    NodeFacts,
    Package,
    PackageManager,
    Product,
)

#: The CUDA Toolkit's own packages (their version is the release): NVIDIA's deb/rpm meta
#: packages ``cuda-toolkit-12-4`` / ``cuda-toolkit`` (12.4.1-1), conda-forge's and NVIDIA's
#: conda ``cuda-toolkit`` (12.4.1), Debian's ``nvidia-cuda-toolkit`` (11.8.89~11.8.0-5~deb12u1:
#: the release after the tilde).
_TOOLKIT_PACKAGE: Final = re.compile(r"^(?:cuda-toolkit(?:-\d+-\d+)?|nvidia-cuda-toolkit)$")
#: Debian's (and Ubuntu's) binary packages of the ``nvidia-cuda-toolkit`` source version each
#: part as "<part's own version>~<toolkit release>-<revision>": libnvjpeg11
#: 11.9.0.86~11.8.0-5~deb12u1, libcudart11.0 11.8.89~11.8.0-5~deb12u1 (bookworm non-free)
_DEBIAN_TOOLKIT: Final = re.compile(r"^(?:\d+:)?\d+(?:\.\d+)+~(?P<release>\d+\.\d+\.\d+)-")
#: the dpkg ``Source:`` field of those packages: "nvidia-cuda-toolkit (11.8.0-5~deb12u1)", or
#: the bare name when the binary's version is the source's
_DEBIAN_TOOLKIT_SOURCE: Final = re.compile(
    r"^nvidia-cuda-toolkit(?:\s+\((?:\d+:)?(?P<release>\d+\.\d+\.\d+)-[^)]*\))?$"
)
_RELEASE: Final = re.compile(r"^(?P<line>\d{1,3}\.\d{1,3})(?:\.(?P<update>\d{1,3}))?(?![\d.])")
#: a package version's upstream part: epoch and Debian/RPM revision dropped ("1:12.4.131-1")
_UPSTREAM: Final = re.compile(r"^(?:\d+:)?(?P<up>\d+(?:\.\d+)+)")
#: the toolkit line a ``cuda-nvcc-12-4`` style package name carries
_NAME_LINE: Final = re.compile(r"-(?P<major>\d{1,3})-(?P<minor>\d{1,3})$")

#: library families whose files are a bulletin's product (`scanner.detect.classifiers`)
_LIBRARY_PRODUCTS: Final = {
    "nvjpeg": "nvjpeg",
    "nvjpeg2k": "nvjpeg2000",
    "nvtiff": "nvtiff",
    "dcgm": "dcgm",
    "nvinfer": "tensorrt",
    # the driver's user-space libraries carry the driver's version
    "libcuda": "driver",
    "nvidia-ml": "driver",
}
#: a product image's version label: "v24.6.1", "24.6.1" (anything else: version unknown)
_LABEL_VERSION: Final = re.compile(r"^v?(?P<version>\d{1,4}\.\d{1,4}\.\d{1,6})$")
#: a Linux driver version's branch is its major: 535.129.03 is on R535 (Windows numbers its
#: releases otherwise, 472.98 on R470: not read here)
_DRIVER_VERSION: Final = re.compile(r"^(?P<major>\d{3})\.\d{2,3}(?:\.\d{2})?$")


def find_products(
    toolkits: Sequence[ToolkitVersion],
    packages: Sequence[Package],
    tools: Sequence[tuple[FileRef, tuple[str, ...], FileFacts, Package | None]],
    libraries: Sequence[GpuLibrary],
    node: NodeFacts | None = None,
    build_lines: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
) -> tuple[Product, ...]:
    """The products present: toolkit releases, tool binaries, product libraries, packages that
    are products, images that are products by their labels, the node's driver.

    ``tools``: each tool binary as (file, aliases, facts, owner package). ``build_lines``: the
    toolkit release line a library's build paths name (`ElfFacts.toolkit_line`), by path.
    ``labels``: an image's config labels.
    """
    out: list[Product] = []
    releases = _toolkit_releases(toolkits, packages)
    out.extend(releases)
    exact = {r.paths[0]: r.version for r in releases if r.version and r.paths}
    by_line: dict[str, set[str]] = {}
    for r in releases:
        if r.version:
            by_line.setdefault(r.version.rsplit(".", 1)[0], set()).add(r.version)
    lines: list[Product] = []
    found: list[Product] = []
    launchers: list[Product] = []
    for ref, aliases, facts, owner in tools:
        row = tool_of(posixpath.basename(ref.path))
        if row is None:
            continue
        tool = _tool(row, ref, aliases, facts, owner, toolkits, exact)
        line = _banner_line(facts)
        if tool.toolkit is None and line is not None and len(by_line.get(line, ())) == 1:
            # the root's only release of the banner's line (a toolkit package, no version.json)
            release = next(iter(by_line[line]))
            tool = replace(tool, toolkit=release, cpes=cpes(product_row(row.product), release))
        if tool.version is None and facts.elf is not None and facts.elf.machine == "":
            launchers.append(tool)
        else:
            found.append(tool)
        if tool.toolkit is None and line is not None:
            lines.append(_line_only(line, _install_root(ref.path), tool))
    out.extend(_with_launchers(found, launchers))
    out.extend(lines)
    for lib in libraries:
        key = _LIBRARY_PRODUCTS.get(lib.ident.family)
        if key is not None:
            line = (build_lines or {}).get(lib.ref.path)
            out.append(_library_product(key, lib, toolkits, exact, line))
    out.extend(_package_products(packages))
    known = {p.key for p in out if p.version}
    # a label of no readable version adds nothing where a file or package says the version
    out.extend(p for p in _label_products(labels or {}) if p.version or p.key not in known)
    driver = node.driver if node is not None else None
    if driver is not None and driver.version:
        src = f"loaded kernel module ({driver.source or 'node facts'})"
        out.append(
            Product(
                key="driver",
                name=product_row("driver").name,
                version=driver.version,
                evidence=(_ev(driver.version, EvidenceMethod.OTHER, src),),
            )
        )
    return merge_products(_driver_branch(p) for p in out)


def _with_launchers(tools: list[Product], launchers: list[Product]) -> list[Product]:
    """Tools, each launcher script of no version joined to the binary of the same tool that its
    package ships (Debian's /usr/bin/nvcc, "exec /usr/lib/nvidia-cuda-toolkit/bin/nvcc"): one
    product with the script among its paths. A launcher no binary explains stays a product of
    unknown version (the matcher's fail-safe case)."""
    out = list(tools)
    for launcher in launchers:
        i = next(
            (
                i
                for i, t in enumerate(out)
                if t.key == launcher.key
                and t.version
                and launcher.owner
                and t.owner == launcher.owner
            ),
            None,
        )
        if i is None:
            out.append(launcher)
        else:
            out[i] = replace(out[i], paths=(*out[i].paths, *launcher.paths))
    return out


def _package_products(packages: Sequence[Package]) -> Iterable[Product]:
    """Packages that are a product by themselves (the Container Toolkit's, DCGM's, ...)."""
    for pkg in packages:
        key = package_product(pkg.name)
        if key is None:
            continue
        row = product_row(key)
        version = _upstream(pkg.version)
        yield Product(
            key=row.key,
            name=row.name,
            version=version,
            owner=pkg.purl,
            evidence=(
                _ev(
                    version or pkg.version,
                    EvidenceMethod.MANIFEST_ANALYSIS,
                    f"{pkg.manager} package {pkg.name} {pkg.version}",
                ),
            ),
        )


def _label_products(labels: Mapping[str, str]) -> Iterable[Product]:
    """An image that is a product by its config labels (the GPU Operator's image)."""
    for row in LABELS:
        named = next((n for n in row.names if all(labels.get(k) == v for k, v in n)), None)
        if named is None:
            continue
        label = next((k for k in row.version_labels if labels.get(k)), None)
        text = labels[label][:80] if label else ""  # an image's text: quoted, never whole
        m = _LABEL_VERSION.match(text)
        said = ", ".join(f"{k}={v!r}" for k, v in named)
        yield Product(
            key=row.product,
            name=product_row(row.product).name,
            version=m["version"] if m else None,
            evidence=(
                _ev(
                    text or "(no version label)",
                    EvidenceMethod.MANIFEST_ANALYSIS,
                    f"image config labels {said}" + (f", {label}={text!r}" if label else ""),
                    Confidence.HIGH if m else Confidence.LOW,
                ),
            ),
        )


def _driver_branch(p: Product) -> Product:
    """A driver product with its branch, CPEs and purl."""
    if p.key != "driver":
        return p
    m = _DRIVER_VERSION.match(p.version or "")
    row = product_row("driver")
    return replace(
        p,
        branch=f"R{m.group('major')}" if m else None,
        cpes=cpes(row, p.version),
        purl=_purl(row.purl, p.version),
    )


def _toolkit_releases(
    toolkits: Sequence[ToolkitVersion], packages: Sequence[Package]
) -> list[Product]:
    """The CUDA Toolkit releases that version files and toolkit packages state."""
    row = product_row("cuda-toolkit")
    out: list[Product] = []
    for tk in toolkits:
        if tk.cuda_version is None:
            continue
        release = _release(tk.cuda_version)
        if release is None:
            continue
        out.append(
            Product(
                key=row.key,
                name=row.name,
                version=release,
                paths=(tk.root,),
                evidence=(
                    Evidence(
                        EvidenceField.VERSION,
                        release,
                        EvidenceMethod.MANIFEST_ANALYSIS,
                        tk.path,
                        Confidence.HIGH,
                    ),
                ),
            )
        )
    for pkg in packages:
        if not _TOOLKIT_PACKAGE.match(pkg.name.lower()):
            continue
        m = _DEBIAN_TOOLKIT.match(pkg.version)
        release = _release(m.group("release") if m else _upstream(pkg.version) or "")
        if release is None:
            continue
        out.append(
            Product(
                key=row.key,
                name=row.name,
                version=release,
                owner=pkg.purl,
                evidence=(
                    Evidence(
                        EvidenceField.VERSION,
                        release,
                        EvidenceMethod.MANIFEST_ANALYSIS,
                        f"{pkg.manager} package {pkg.name} {pkg.version}",
                        Confidence.HIGH,
                    ),
                ),
            )
        )
    return out


def _debian_release(pkg: Package | None) -> str | None:
    """The CUDA Toolkit release a dpkg package of Debian's ``nvidia-cuda-toolkit`` source was
    built from (libnvjpeg11 11.9.0.86~11.8.0-5~deb12u1: 11.8.0), or None for any other."""
    if pkg is None or pkg.manager is not PackageManager.DPKG:
        return None
    m = _DEBIAN_TOOLKIT_SOURCE.match(dict(pkg.extra).get("source-package", pkg.name))
    if m is None:
        return None
    if m.group("release"):
        return _release(m.group("release"))
    v = _DEBIAN_TOOLKIT.match(pkg.version)
    return _release(v.group("release") if v else _upstream(pkg.version) or "")


def _release(text: str) -> str | None:
    """A toolkit release as major.minor.update ("12.4" -> "12.4.0"), or None."""
    m = _RELEASE.match(text)
    if m is None:
        return None
    return f"{m.group('line')}.{int(m.group('update') or 0)}"


def _upstream(version: str) -> str | None:
    m = _UPSTREAM.match(version)
    return m.group("up") if m else None


def _install_root(path: str) -> str:
    """The install tree of a tool binary: the directory above its ``bin``."""
    parent = posixpath.dirname(path)
    return posixpath.dirname(parent) if posixpath.basename(parent) == "bin" else parent


def _toolkit_of(path: str, toolkits: Sequence[ToolkitVersion]) -> ToolkitVersion | None:
    """The toolkit whose directory holds ``path`` (the deepest one)."""
    best: ToolkitVersion | None = None
    for tk in toolkits:
        root = tk.root.rstrip("/") + "/"
        if path.startswith(root) and (best is None or len(tk.root) > len(best.root)):
            best = tk
    return best


def _banner_line(facts: FileFacts) -> str | None:
    """The release line ("12.4") of a compiler tool's banner, if it has one."""
    for text in facts.elf.version_strings if facts.elf else ():
        m = re.search(r"release (\d+\.\d+)", text)
        if m:
            return m.group(1)
    return None


def _tool(
    row: ToolRow,
    ref: FileRef,
    aliases: tuple[str, ...],
    facts: FileFacts,
    owner: Package | None,
    toolkits: Sequence[ToolkitVersion],
    exact: Mapping[str, str],
) -> Product:
    """One tool binary with its version, from the best evidence there is."""
    product = product_row(row.product)
    evidence: list[Evidence] = []
    version: str | None = None
    for text in facts.elf.version_strings if facts.elf else ():
        for rx in row.markers:
            m = re.search(rx.decode(), text)
            if m is None:
                continue
            groups = m.groupdict()
            if groups.get("version"):
                version = version or groups["version"]
                evidence.append(_ev(groups["version"], EvidenceMethod.BINARY_ANALYSIS, text))
    if row.path_version:
        m = re.search(row.path_version, ref.path)
        if m is not None:
            evidence.append(_ev(m.group("version"), EvidenceMethod.FILENAME, ref.path))
            version = version or m.group("version")
    tk = _toolkit_of(ref.path, toolkits)
    if tk is not None and row.version_json_key:
        listed = dict(tk.components).get(row.version_json_key)
        if listed:
            evidence.append(_ev(listed, EvidenceMethod.MANIFEST_ANALYSIS, tk.path))
            version = version or listed
    if owner is not None and re.search(row.package_re, owner.name, re.IGNORECASE):
        upstream = _upstream(owner.version)
        if upstream:
            src = f"{owner.manager} package {owner.name} {owner.version}"
            evidence.append(_ev(upstream, EvidenceMethod.MANIFEST_ANALYSIS, src, Confidence.MEDIUM))
            version = version or upstream
    release = exact.get(tk.root) if tk is not None else None
    if release is None and tk is None:
        release = exact.get(_install_root(ref.path)) or _debian_release(owner)
    return Product(
        key=product.key,
        name=product.name,
        version=version,
        purl=_purl(product.purl, version),
        cpes=cpes(product, release) if product.toolkit_part else cpes(product, version),
        paths=(ref.path, *aliases),
        sha256=facts.digests.sha256,
        owner=owner.purl if owner else None,
        toolkit=release,
        layer=ref.layer,
        evidence=tuple(evidence),
    )


def _line_only(line: str, root: str, tool: Product) -> Product:
    """A toolkit known only by its compiler's banner: the release line, not the update."""
    row = product_row("cuda-toolkit")
    return Product(
        key=row.key,
        name=row.name,
        version=None,
        paths=(root,),
        line=line,
        evidence=(
            Evidence(
                EvidenceField.VERSION,
                line,
                EvidenceMethod.BINARY_ANALYSIS,
                f"{tool.paths[0]}: release line only (no update number)",
                Confidence.LOW,
            ),
        ),
    )


def _library_product(
    key: str,
    lib: GpuLibrary,
    toolkits: Sequence[ToolkitVersion],
    exact: Mapping[str, str],
    build_line: str | None = None,
) -> Product:
    row = product_row(key)
    tk = _toolkit_of(lib.ref.path, toolkits)
    version = lib.ident.version
    release = exact.get(tk.root) if tk is not None else _debian_release(lib.owner)
    evidence = tuple(ev for ev in lib.ident.evidence if ev.field is EvidenceField.VERSION)
    line = None
    if release is None and build_line is not None:
        # no install or package names the release: the build tree's line is what is known
        line = build_line
        src = f"{lib.ref.path}: build paths of toolkit r{build_line} (release line only)"
        evidence += (_ev(build_line, EvidenceMethod.BINARY_ANALYSIS, src, Confidence.LOW),)
    return Product(
        key=row.key,
        name=row.name,
        version=version,
        purl=_purl(row.purl, version),
        cpes=cpes(row, version),
        paths=(lib.ref.path,),
        sha256=lib.digests.sha256,
        owner=lib.owner.purl if lib.owner else None,
        toolkit=release,
        line=line,
        layer=lib.ref.layer,
        evidence=evidence,
    )


def _ev(
    value: str, method: EvidenceMethod, source: str, confidence: Confidence = Confidence.HIGH
) -> Evidence:
    return Evidence(EvidenceField.VERSION, value, method, source, confidence)


def _purl(prefix: str, version: str | None) -> str | None:
    if not prefix:
        return None
    return f"{prefix}@{version}" if version else prefix


def merge_products(products: Iterable[Product]) -> tuple[Product, ...]:
    """One product per (key, version, release line): paths, evidence and the first digest,
    owner and toolkit release of its copies joined; ordered by key, then version."""
    merged: dict[tuple[str, str, str], Product] = {}
    for p in products:
        k = (p.key, p.version or "", p.line or "")
        old = merged.get(k)
        if old is None:
            merged[k] = p
            continue
        merged[k] = replace(
            old,
            paths=tuple(dict.fromkeys((*old.paths, *p.paths))),
            evidence=tuple(dict.fromkeys((*old.evidence, *p.evidence))),
            sha256=old.sha256 if old.sha256 == p.sha256 else None,
            owner=old.owner or p.owner,
            toolkit=old.toolkit or p.toolkit,
            cpes=old.cpes or p.cpes,
            purl=old.purl or p.purl,
            layer=old.layer if old.layer == p.layer else None,
        )
    # a line-only toolkit that an exact release of the same line already covers says nothing
    exact_lines = {
        p.version.rsplit(".", 1)[0]
        for p in merged.values()
        if p.key == "cuda-toolkit" and p.version
    }
    kept = [
        p
        for p in merged.values()
        if not (p.key == "cuda-toolkit" and p.version is None and p.line in exact_lines)
    ]
    kept = [_with_cpes(p) for p in kept]
    return tuple(sorted(kept, key=lambda p: (p.key, p.version or "", p.line or "", p.paths)))


def _with_cpes(p: Product) -> Product:
    """A product of its own (no toolkit part) gets its CPEs and purl from its version."""
    row = product_row(p.key)
    if row.toolkit_part or not p.version:
        return p
    return replace(
        p, cpes=p.cpes or cpes(row, p.version), purl=p.purl or _purl(row.purl, p.version)
    )
