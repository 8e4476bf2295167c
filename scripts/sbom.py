"""`make sbom`: gpuprov's own CycloneDX 1.6 SBOM, for the service as the image installs it.

cyclonedx-py (the `cyclonedx-bom` package, a test dependency) reads requirements.lock: one
component per locked distribution with its purl and the lock's SHA-256 digests. This script then
names the root component (gpuprov, its version, its purl), records which components gpuprov
depends on directly (pyproject's dependencies), validates the result against the CycloneDX 1.6
JSON schema (strict) and writes it. Offline and reproducible (SOURCE_DATE_EPOCH is honoured).
The base image's own packages are not in it: `gpuprov scan` of the built image reports those
(docs/deploy.md).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def build(lock: Path, pyproject: Path) -> dict[str, object]:
    """The SBOM of ``lock``'s distributions with gpuprov as the root component."""
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    sys.path.insert(0, str(CHECKOUT))
    from scanner import __version__

    tool = Path(sys.executable).parent / "cyclonedx-py"
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "bom.json"
        subprocess.run(
            [str(tool), "requirements", str(lock), "--pyproject", str(pyproject)]
            + ["--mc-type", "application", "--sv", "1.6", "--output-reproducible"]
            + ["-o", str(raw)],
            check=True,
            capture_output=True,
        )
        bom = json.loads(raw.read_text())
    purl = f"pkg:pypi/gpuprov@{__version__}"
    root = bom["metadata"]["component"]
    root.update({"bom-ref": purl, "version": __version__, "purl": purl})
    project = tomllib.loads(pyproject.read_text())["project"]
    direct = {
        _canonical(re.split(r"[\s\[<>=!~;]", d, maxsplit=1)[0]) for d in project["dependencies"]
    }
    # purls as references: stable across lock changes (cyclonedx-py numbers the lock's lines)
    for component in bom["components"]:
        component["bom-ref"] = component["purl"]
        component.pop("description", None)  # the lock line again, hashes included
    refs = {_canonical(c["name"]): c["bom-ref"] for c in bom["components"]}
    missing = direct - set(refs)
    if missing:
        raise SystemExit(f"sbom: not in {lock.name} (run `make lock`): {sorted(missing)}")
    dependencies = [{"ref": c["bom-ref"]} for c in bom["components"]]
    dependencies.append({"ref": purl, "dependsOn": sorted(refs[name] for name in direct)})
    bom["dependencies"] = dependencies
    text = json.dumps(bom, indent=2, sort_keys=True) + "\n"
    error = JsonStrictValidator(SchemaVersion.V1_6).validate_str(text)
    if error is not None:
        raise SystemExit(f"sbom: not valid CycloneDX 1.6: {error}")
    result: dict[str, object] = json.loads(text)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "-o", "--output", type=Path, default=CHECKOUT / "build" / "gpuprov.cdx.json"
    )
    parser.add_argument("--lock", type=Path, default=CHECKOUT / "requirements.lock")
    arguments = parser.parse_args()
    bom = build(arguments.lock, CHECKOUT / "pyproject.toml")
    arguments.output.parent.mkdir(parents=True, exist_ok=True)
    arguments.output.write_text(json.dumps(bom, indent=2, sort_keys=True) + "\n")
    components = bom["components"]
    assert isinstance(components, list)
    print(  # noqa: T201
        f"sbom: {arguments.output} (CycloneDX 1.6, valid): gpuprov and {len(components)} "
        "locked components",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
