"""What an SPDX report costs against the same content as CycloneDX (issue 21); prints JSON.

For each size (elements: packages and files together, the count `GPUPROV_MAX_REPORT_COMPONENTS`
bounds, 100,000 by default) a Syft-shaped SPDX 2.3 JSON image document is built before timing:
half packages with a purl, contained by the image, half files (SHA-1 and SHA-256) each contained
by one package, one file in ten a GPU library. The same content as CycloneDX is the document's
reading (`scanner.bom.spdx_mapping`): the BOM the rest of the service then reads. Timed:

1. offline, the stages of reading SPDX: JSON parse, spdx-tools' parser, the checks
   (`spdx_reader.check`: spdx-tools' per-element validators and the linear document-wide
   rules), the mapping; and spdx-tools' own `validate_full_spdx_document`, which gpuprov does not
   call (sizes up to --full-validator-max only: it is quadratic);
2. `POST /api/v1/reports` in process (FastAPI TestClient, SQLite file, a fresh database per
   size): the SPDX body, then the CycloneDX body of a second image with the same content;
3. the relationship shortcuts: the same document with each file given by its package's
   ``hasFiles`` instead of a CONTAINS relationship, and as tag-value with each file after its
   package, read by gpuprov (`spdx_reader`) at every size and by spdx-tools' own parsers at
   --library-sizes (they look each relationship up in a list: quadratic).

    .venv/bin/python bench/spdx_ingest.py [--sizes 1000 10000 100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fastapi.testclient import TestClient  # noqa: E402

from app.domain.tokens import create_token  # noqa: E402
from app.main import create_app  # noqa: E402
from app.settings import Settings  # noqa: E402
from app.storage.migrate import upgrade  # noqa: E402
from scanner.bom import spdx_mapping, spdx_reader  # noqa: E402


def document(elements: int, name: str = "bench/app") -> dict[str, Any]:
    """A Syft-shaped SPDX 2.3 image document of ``elements`` packages and files (the image's
    own package included)."""
    digest = "sha256:" + f"{hash(name) & 0xFFFFFFFF:08x}" * 8
    root = "SPDXRef-DocumentRoot-Image-app"
    packages: list[dict[str, Any]] = [
        {
            "SPDXID": root,
            "name": name,
            "versionInfo": digest,
            "downloadLocation": "NOASSERTION",
            "filesAnalyzed": False,
            "primaryPackagePurpose": "CONTAINER",
            "externalRefs": [
                {
                    "referenceCategory": "PACKAGE-MANAGER",
                    "referenceType": "purl",
                    "referenceLocator": f"pkg:oci/app@{digest.replace(':', '%3A')}",
                }
            ],
        }
    ]
    files: list[dict[str, Any]] = []
    relationships = [
        {
            "spdxElementId": "SPDXRef-DOCUMENT",
            "relationshipType": "DESCRIBES",
            "relatedSpdxElement": root,
        }
    ]
    rest = elements - 1
    for i in range(rest - rest // 2):
        pid = f"SPDXRef-Package-python-p{i}"
        packages.append(
            {
                "SPDXID": pid,
                "name": f"p{i}",
                "versionInfo": "1.0",
                "downloadLocation": "NOASSERTION",
                "filesAnalyzed": False,
                "sourceInfo": "acquired package info from installed python package manifest "
                f"file: /usr/lib/python3/dist-packages/p{i}-1.0.dist-info/METADATA",
                "externalRefs": [
                    {
                        "referenceCategory": "PACKAGE-MANAGER",
                        "referenceType": "purl",
                        "referenceLocator": f"pkg:pypi/p{i}@1.0",
                    }
                ],
            }
        )
        relationships.append(
            {"spdxElementId": root, "relationshipType": "CONTAINS", "relatedSpdxElement": pid}
        )
    for i in range(rest // 2):
        fid = f"SPDXRef-File-f{i}"
        base = f"libcudart.so.12.4.{i}" if i % 10 == 0 else f"f{i}.py"
        sha = f"{i:064x}"
        files.append(
            {
                "SPDXID": fid,
                "fileName": f"usr/lib/python3/dist-packages/p{i}/{base}",
                "checksums": [
                    {"algorithm": "SHA1", "checksumValue": sha[:40]},
                    {"algorithm": "SHA256", "checksumValue": sha},
                ],
                "licenseConcluded": "NOASSERTION",
                "copyrightText": "NOASSERTION",
            }
        )
        relationships.append(
            {
                "spdxElementId": f"SPDXRef-Package-python-p{i}",
                "relationshipType": "CONTAINS",
                "relatedSpdxElement": fid,
            }
        )
    return {
        "spdxVersion": "SPDX-2.3",
        "dataLicense": "CC0-1.0",
        "SPDXID": "SPDXRef-DOCUMENT",
        "name": name,
        "documentNamespace": f"https://anchore.com/syft/image/{name}-{elements}",
        "creationInfo": {
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "creators": ["Organization: Anchore, Inc", "Tool: syft-1.18.1"],
        },
        "packages": packages,
        "files": files,
        "relationships": relationships,
    }


def has_files(doc: dict[str, Any]) -> dict[str, Any]:
    """The document with each package's files in ``hasFiles``, not CONTAINS relationships."""
    packages = {p["SPDXID"]: dict(p) for p in doc["packages"]}
    kept = []
    for r in doc["relationships"]:
        if r["relatedSpdxElement"].startswith("SPDXRef-File-"):
            packages[r["spdxElementId"]].setdefault("hasFiles", []).append(r["relatedSpdxElement"])
        else:
            kept.append(r)
    return {**doc, "packages": list(packages.values()), "relationships": kept}


def tag_value(doc: dict[str, Any]) -> str:
    """The document as tag-value: relationships first, each file after its package."""
    info = doc["creationInfo"]
    lines = [
        f"SPDXVersion: {doc['spdxVersion']}",
        f"DataLicense: {doc['dataLicense']}",
        f"SPDXID: {doc['SPDXID']}",
        f"DocumentName: {doc['name']}",
        f"DocumentNamespace: {doc['documentNamespace']}",
        *(f"Creator: {c}" for c in info["creators"]),
        f"Created: {info['created']}",
    ]
    files = {f["SPDXID"]: f for f in doc["files"]}
    contained: dict[str, list[str]] = {}
    for r in doc["relationships"]:
        if r["relatedSpdxElement"] in files:
            contained.setdefault(r["spdxElementId"], []).append(r["relatedSpdxElement"])
        else:
            lines.append(
                f"Relationship: {r['spdxElementId']} {r['relationshipType']} "
                f"{r['relatedSpdxElement']}"
            )
    for p in doc["packages"]:
        lines += [
            f"PackageName: {p['name']}",
            f"SPDXID: {p['SPDXID']}",
            "PackageDownloadLocation: NOASSERTION",
            f"FilesAnalyzed: {'true' if p['SPDXID'] in contained else 'false'}",
        ]
        if p.get("versionInfo"):
            lines.append(f"PackageVersion: {p['versionInfo']}")
        if p.get("primaryPackagePurpose"):
            lines.append(f"PrimaryPackagePurpose: {p['primaryPackagePurpose']}")
        for ref in p.get("externalRefs", ()):
            lines.append(
                f"ExternalRef: {ref['referenceCategory']} {ref['referenceType']} "
                f"{ref['referenceLocator']}"
            )
        for fid in contained.get(p["SPDXID"], ()):
            f = files[fid]
            lines += [f"FileName: ./{f['fileName']}", f"SPDXID: {fid}"]
            lines += [
                f"FileChecksum: {c['algorithm']}: {c['checksumValue']}" for c in f["checksums"]
            ]
    return "\n".join(lines) + "\n"


def shortcuts(doc: dict[str, Any], repeat: int, library: bool) -> dict[str, Any]:
    from spdx_tools.spdx.parser.jsonlikedict.json_like_dict_parser import JsonLikeDictParser
    from spdx_tools.spdx.parser.tagvalue.parser import Parser

    compact, text = has_files(doc), tag_value(doc)
    out: dict[str, Any] = {}
    out["hasfiles_read_spdx_s"], mapped = timed(lambda: spdx_mapping.read_spdx(compact), repeat)
    assert len(mapped.bom["components"]) == len(doc["packages"]) + len(doc["files"]) - 1
    out["tag_value_read_spdx_s"], mapped = timed(lambda: spdx_mapping.read_spdx(text), 1)
    assert len(mapped.bom["components"]) == len(doc["packages"]) + len(doc["files"]) - 1
    if library:
        out["hasfiles_spdx_tools_parse_s"], _ = timed(
            lambda: JsonLikeDictParser().parse(compact), 1
        )
        out["tag_value_spdx_tools_parse_s"], _ = timed(lambda: Parser().parse(text), 1)
    return out


def timed(work: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """The median seconds of ``repeat`` runs, and the last result."""
    seconds, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = work()
        seconds.append(time.perf_counter() - started)
    return round(statistics.median(seconds), 3), result


def offline(doc: dict[str, Any], body: bytes, repeat: int, full_validator: bool) -> dict[str, Any]:
    from spdx_tools.spdx.parser.jsonlikedict.json_like_dict_parser import JsonLikeDictParser
    from spdx_tools.spdx.validation.document_validator import validate_full_spdx_document

    out: dict[str, Any] = {}
    out["json_parse_s"], parsed = timed(lambda: json.loads(body), repeat)
    out["spdx_tools_parse_s"], model = timed(lambda: JsonLikeDictParser().parse(parsed), repeat)
    out["check_s"], _ = timed(lambda: spdx_reader.check(model), repeat)
    out["mapping_s"], mapped = timed(lambda: spdx_mapping.reading(model), repeat)
    out["read_spdx_total_s"], _ = timed(lambda: spdx_mapping.read_spdx(parsed), repeat)
    if full_validator:
        out["spdx_tools_full_validator_s"], messages = timed(
            lambda: validate_full_spdx_document(model), 1
        )
        # as in Syft's own documents: CONTAINS from a package with filesAnalyzed false
        out["spdx_tools_full_validator_messages"] = len(messages)
    cdx = json.dumps(mapped.bom, separators=(",", ":")).encode()
    out["cyclonedx_json_parse_s"], _ = timed(lambda: json.loads(cdx), repeat)
    return out


def post(client: TestClient, token: str, body: bytes, media: str) -> float:
    started = time.perf_counter()
    answer = client.post(
        "/api/v1/reports",
        content=body,
        headers={"Authorization": f"Bearer {token}", "Content-Type": media},
    )
    seconds = time.perf_counter() - started
    assert answer.status_code == 201, answer.text[:500]
    return round(seconds, 3)


def service_case(size: int, spdx_body: bytes, cdx_body: bytes) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(database_url=f"sqlite:///{tmp}/bench.db", environment="test")
        upgrade(settings.database_url)
        app = create_app(settings)
        with TestClient(app) as client:
            with app.state.db.transaction(write=True) as session:
                token = create_token(session, "bench", ["report:write"], None).secret
            return {
                "post_spdx_s": post(client, token, spdx_body, "application/spdx+json"),
                "post_cyclonedx_s": post(client, token, cdx_body, "application/vnd.cyclonedx+json"),
            }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--full-validator-max", type=int, default=10_000)
    parser.add_argument("--library-sizes", type=int, nargs="*", default=[1_000, 2_000, 4_000])
    args = parser.parse_args()
    results = []
    for size in args.sizes:
        doc = document(size)
        body = json.dumps(doc, separators=(",", ":")).encode()
        mapped = spdx_mapping.read_spdx(doc)
        other = spdx_mapping.read_spdx(document(size, name="bench/app-cdx")).bom
        for tool in other["metadata"]["tools"]["components"]:
            tool["type"] = "application"  # CycloneDX 1.6 requires it; the reading omits it
        cdx_body = json.dumps(other, separators=(",", ":")).encode()
        case: dict[str, Any] = {
            "elements": size,
            "relationships": len(doc["relationships"]),
            "gpu_files": sum(1 for f in doc["files"] if "libcudart" in f["fileName"]),
            "spdx_mb": round(len(body) / 2**20, 2),
            "cyclonedx_mb": round(len(cdx_body) / 2**20, 2),
            "cyclonedx_components": len(mapped.bom["components"]),
        }
        case.update(offline(doc, body, args.repeat, size <= args.full_validator_max))
        case.update(service_case(size, body, cdx_body))
        case.update(shortcuts(doc, args.repeat, False))
        results.append(case)
        print(json.dumps(case), file=sys.stderr)
    quadratic = []
    for size in args.library_sizes:
        case = {"elements": size, **shortcuts(document(size), 1, True)}
        quadratic.append(case)
        print(json.dumps(case), file=sys.stderr)
    print(
        json.dumps(
            {"bench": "spdx_ingest", "results": results, "shortcuts_vs_spdx_tools": quadratic},
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
