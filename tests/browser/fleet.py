"""A small real fleet for the dashboard tests: images and hosts built from compiled GPU
libraries, scanned by the real scanner (CycloneDX reports), with the documents the service
needs to judge them (trust policy, signed reference catalog, promotion policies).

The fleet:

- ``registry.acme.test/ml/train:v1`` (env=prod): cuDNN 9.1.0 + cudart 12.4 as pip installs them,
  signed by CI with SLSA Build level 3 provenance; every file is the vendor's (catalog).
- ``registry.acme.test/ml/serve:v2`` (env=staging): the same libraries, signed, SLSA 3.
- ``registry.acme.test/ml/infer:v5`` (env=prod): cuDNN 9.3.0 (in no catalog, not in staging),
  signed by the release key, no provenance.
- ``registry.acme.test/ml/train:v1-hotfix`` (env=prod), **the tampered image**: libcudnn_ops
  changed after install (its RECORD hash no longer matches: integrity ``modified``; the vendor
  catalog lists another digest: provenance ``conflict``), an unowned copy of cudart under
  /opt/app/lib, and no signature.
- host ``gpu-node-07`` (env=prod), scanned twice: cudart 12.4.127 then 12.6.77.
- a host whose hostname is ``<img src=x onerror=alert(1)>`` (env=lab) holding a library under
  ``/opt/"><script>alert(1)</script>/lib``: report values that must render as text.
- host ``DRIVER_HOST`` (env=prod): an R535 driver (``DRIVER_VERSION``, libcuda and NVML as
  the driver installs them, no package records) that NVIDIA's October 2025 bulletin (5703)
  names as affected: the advisory pages' vulnerable asset.
- host ``BIG_HOST`` (env=research), a real training node's size: 100 GPU library files in five
  conda environments with long paths (each with its own pip wheels of cuDNN and the CUDA
  libraries) and the CUDA toolkit, two environments owned by pip's records and three not: the
  pages must stay readable (no sideways scrolling, a bounded height).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from typer.testing import CliRunner

from gpuprov.cli import app as cli
from tests.fixtures import cosign as cs
from tests.fixtures import keys
from tests.fixtures.elf import CUDNN9_COMPONENTS, build_cuda_library, build_cudnn_library
from tests.fixtures.images import Image, Layer, Member, file, write_oci_layout
from tests.fixtures.packages import write_dist_info
from tests.fixtures.sigstore_private import ISSUER, SUBJECT, PrivateSigstore
from tests.scanner.node.nodetree import DRIVER as NODE_DRIVER
from tests.scanner.node.nodetree import gpu_node, nvidia_smi_xml

BUILDER = (
    "https://git.example.test/slsa/builder/.github/workflows/generator_container_slsa3.yml"
    "@refs/tags/v2.1.0"
)
SOURCE = "https://git.example.test/acme/ml"
REGISTRY = "registry.acme.test/ml"
SITE = "usr/local/lib/python3.11/site-packages"
TAMPERED = f"{REGISTRY}/train:v1-hotfix"
TAMPERED_FILE = f"/{SITE}/nvidia/cudnn/lib/libcudnn_ops.so.9"
HOSTILE_NAME = "<img src=x onerror=alert(1)>"
HOSTILE_DIR = '/opt/"><script>alert(1)</script>/lib'
BIG_HOST = "gpu-train-node-042.research-cluster.example.internal"
DRIVER_HOST = "gpu-node-12"
#: prior to 535.274.02 on the R535 branch: CVE-2025-23280 (HIGH) and the rest of bulletin 5703
DRIVER_VERSION = "535.129.03"
#: GPU library files on `BIG_HOST`
BIG_HOST_FILES = 100
#: the conda environments of `BIG_HOST` (long names, as real ones are); the first two are pip's
BIG_HOST_ENVS = (
    "llm-finetune-pytorch-2.4.1-cuda12.4-cudnn9.1-nccl2.21",
    "vision-detectron2-experimental-cuda12.4-build-2026-11",
    "speech-whisper-large-v3-distillation-cuda12.4",
    "recsys-embedding-tables-torchrec-0.8-cuda12.4",
    "shared-research-notebook-base-cuda12.4-cudnn9",
)
#: CUDA libraries of the big host as (file name stem, wheel directory, version)
BIG_HOST_CUDA = (
    ("cudart", "cuda_runtime", "12.4.127"),
    ("cublas", "cublas", "12.4.5.8"),
    ("cublasLt", "cublas", "12.4.5.8"),
    ("cufft", "cufft", "11.2.1.3"),
    ("curand", "curand", "10.3.5.147"),
    ("cusparse", "cusparse", "12.3.1.170"),
    ("cusolver", "cusolver", "11.6.1.9"),
    ("nccl", "nccl", "2.21.5"),
    ("nvrtc", "cuda_nvrtc", "12.4.127"),
    ("nvJitLink", "nvjitlink", "12.4.127"),
)

#: an advisory whose notes and title are hostile markup (imported beside NVIDIA's bulletins)
HOSTILE_CVE = "CVE-2026-0001"
HOSTILE_NOTES = (
    'An overflow <script>alert("notes")</script> in <b>widget</b>.'
    '<img src=x onerror=alert("img")>'
    "<a href=\"javascript:alert('link')\">click me</a> "
    '<a href="https://example.com/fix" onclick="alert(\'click\')">the fix</a>'
    '<ul><li>upgrade</li></ul><div style="position:fixed;inset:0">cover</div>'
)
HOSTILE_TITLE = '<script>alert("title")</script>'

#: the policy the gate and the compliance pages judge the fleet under (version 2 of "prod")
PROD_POLICY_V1 = """\
apiVersion: gpuprov.dev/v1
kind: PromotionPolicy
name: prod
rules:
  integrity: {forbid: [modified]}
  ownership: {}
  image_signature: {}
"""
PROD_POLICY = """\
apiVersion: gpuprov.dev/v1
kind: PromotionPolicy
name: prod
rules:
  integrity: {forbid: [modified, unowned]}
  ownership: {}
  provenance: {require: verified, action: warn}
  versions: {allow: {cudnn: ">=9.1,<10"}, minimum: {cudart: "12.0"}}
  cuda_pairing: {}
  mixed_cudnn: {}
  image_signature: {}
  slsa: {min_level: 2, action: warn}
  scan_age: {max_hours: 72}
  parity: {label: env, baseline: staging, target: prod, action: warn}
"""

#: a lax policy stored beside prod, first by name but never used by the gate
DEMO_POLICY = """\
apiVersion: gpuprov.dev/v1
kind: PromotionPolicy
name: allowdemo
rules:
  integrity: {forbid: [modified]}
"""

runner = CliRunner()


@dataclass
class Report:
    """One scan's CycloneDX report and the labels it is pushed with."""

    name: str
    body: bytes
    labels: dict[str, str]
    digest: str | None = None  # manifest digest of an image


@dataclass
class Fleet:
    """Every report in push order, and the service-side documents."""

    reports: list[Report] = field(default_factory=list)
    trust_policy: str = ""
    catalog: bytes = b""

    @property
    def images(self) -> list[Report]:
        return [r for r in self.reports if r.digest is not None]


def hostile_advisory() -> bytes:
    """A CSAF document naming `HOSTILE_CVE` with hostile notes and title (a publisher's text
    is untrusted input)."""
    from tests.scanner.advisories.documents import csaf, encode

    doc = csaf()
    doc["vulnerabilities"][0]["notes"] = [{"category": "description", "text": HOSTILE_NOTES}]
    doc["vulnerabilities"][0]["title"] = HOSTILE_TITLE
    assert doc["vulnerabilities"][0]["cve"] == HOSTILE_CVE
    return encode(doc)


def _pip_libs(cudnn: tuple[int, int, int], build: int, cudart: str, work: Path) -> dict[str, bytes]:
    """site-packages-relative path -> bytes of the nvidia-cudnn and cuda-runtime wheels' files."""
    out: dict[str, bytes] = {}
    lib = work / f"cudnn-{'.'.join(map(str, cudnn))}"
    for comp in ("cudnn_graph", "cudnn_ops"):
        path = build_cudnn_library(lib, comp, cudnn, build=build, filename=f"lib{comp}.so.9")
        out[f"nvidia/cudnn/lib/lib{comp}.so.9"] = path.read_bytes()
    path = build_cuda_library(work / f"cudart-{cudart}", "cudart", cudart)
    out["nvidia/cuda_runtime/lib/libcudart.so.12"] = path.read_bytes()
    return out


def _site(root: Path, libs: dict[str, bytes], cudnn: str, cudart: str) -> Path:
    """pip's install of the two wheels under ``root``: files and dist-info RECORDs."""
    site = root / SITE
    write_dist_info(
        site, "nvidia-cudnn-cu12", cudnn, {k: v for k, v in libs.items() if "/cudnn/" in k}
    )
    write_dist_info(
        site, "nvidia-cuda-runtime-cu12", cudart, {k: v for k, v in libs.items() if "cuda_r" in k}
    )
    return site


def _members(root: Path) -> list[Member]:
    return [
        file(str(p.relative_to(root)), p.read_bytes())
        for p in sorted(root.rglob("*"))
        if p.is_file()
    ]


def _scan(target: str, *args: str) -> bytes:
    result = runner.invoke(
        cli, ["scan", target, "--no-cache", "-q", "-f", "cyclonedx", "--workers", "1", *args]
    )
    assert result.exit_code == 0, result.output
    return result.stdout.encode()


def _trust_file(base: Path) -> Path:
    images = json.dumps([f"{REGISTRY}/*"])
    path = base / "trust.yaml"
    path.write_text(
        f"""\
version: 1
roots:
  - path: {base / "private-root.json"}
    name: acme-private
signers:
  - name: release-key
    key: {base / "release.pub"}
    images: {images}
  - name: ci
    issuer: {ISSUER}
    subject: {SUBJECT}
    images: {images}
slsa:
  builders:
    - id: {BUILDER}
      level: 3
      signers: [ci]
"""
    )
    return path


def build_fleet(base: Path) -> Fleet:
    """Build, sign and scan the fleet under ``base``; returns the reports and documents."""
    base.mkdir(parents=True, exist_ok=True)
    fleet = Fleet()
    instance = PrivateSigstore()
    (base / "private-root.json").write_bytes(instance.trusted_root_json())
    release = keys.generate("ecdsa")
    keys.write_keypair(base, "release", release)
    vendor = keys.generate("ecdsa")
    vendor_key, vendor_pub = keys.write_keypair(base, "vendor", vendor)
    trust = _trust_file(base)

    good = _pip_libs((9, 1, 0), 70, "12.4.127", base / "build")
    newer = _pip_libs((9, 3, 0), 75, "12.4.127", base / "build")

    # The vendor's golden install: the reference catalog is built from its scan and signed.
    golden = base / "golden"
    _site(golden, good, "9.1.0.70", "12.4.127")
    golden_report = base / "golden.cdx.json"
    golden_report.write_bytes(_scan(str(golden)))
    unsigned = base / "catalog.json"
    res = runner.invoke(
        cli,
        [
            "catalog",
            "from-scan",
            str(golden_report),
            "--name",
            "nvidia-wheels",
            "-o",
            str(unsigned),
        ],
    )
    assert res.exit_code == 0, res.output
    signed = base / "catalog.dsse.json"
    res = runner.invoke(
        cli, ["catalog", "sign", str(unsigned), "--key", str(vendor_key), "-o", str(signed)]
    )
    assert res.exit_code == 0, res.output
    fleet.catalog = signed.read_bytes()
    pem = vendor_pub.read_text().strip().replace("\n", "\n      ")
    fleet.trust_policy = (
        "version: 1\nsigners:\n  - name: nvidia-catalog\n    families: [cudnn, cudart]\n"
        f"    key_pem: |\n      {pem}\n"
    )

    def image(
        ref: str,
        root: Path,
        labels: dict[str, str],
        *,
        attest: tuple[str, ...] = (),
    ) -> None:
        name, tag = ref.rsplit(":", 1)
        layout = base / "layouts" / ref.replace("/", "_").replace(":", "_")
        built = write_oci_layout(
            layout,
            Image([Layer(_members(root))], labels={"org.opencontainers.image.title": ref}),
            tag,
            annotations={tag: {"io.containerd.image.name": ref}},
        )
        digest = built.manifest_digest
        args: list[str] = ["--trust", str(trust)]
        for kind in attest:
            doc = {
                "sign": lambda: instance.sign_dsse(cs.cosign_sign_statement(digest)),
                "provenance": lambda: instance.sign_dsse(
                    cs.slsa_provenance(digest, BUILDER, SOURCE)
                ),
                "key-sign": lambda: instance.key_bundle(
                    release, payload=cs.cosign_sign_statement(digest)
                ),
            }[kind]()
            path = layout.with_suffix(f".{kind}.json")
            path.write_text(json.dumps(doc))
            args += ["--attestation", str(path)]
        # scanned from the fleet's directory: the report names the layout by a short path
        cwd = os.getcwd()
        os.chdir(base)
        try:
            body = _scan(f"oci:{layout.relative_to(base)}:{tag}", *args)
        finally:
            os.chdir(cwd)
        fleet.reports.append(Report(ref, body, labels, digest))

    train = base / "roots" / "train"
    _site(train, good, "9.1.0.70", "12.4.127")
    image(
        f"{REGISTRY}/train:v1", train, {"env": "prod", "team": "ml"}, attest=("sign", "provenance")
    )
    serve = base / "roots" / "serve"
    _site(serve, good, "9.1.0.70", "12.4.127")
    (serve / "opt" / "serve").mkdir(parents=True)
    (serve / "opt" / "serve" / "server.py").write_text("print('serve')\n")
    image(
        f"{REGISTRY}/serve:v2",
        serve,
        {"env": "staging", "team": "ml"},
        attest=("sign", "provenance"),
    )
    infer = base / "roots" / "infer"
    _site(infer, newer, "9.3.0.75", "12.4.127")
    image(f"{REGISTRY}/infer:v5", infer, {"env": "prod", "team": "vision"}, attest=("key-sign",))

    hotfix = base / "roots" / "hotfix"
    _site(hotfix, good, "9.1.0.70", "12.4.127")
    ops = hotfix / TAMPERED_FILE.lstrip("/")
    data = bytearray(ops.read_bytes())
    data[-1] ^= 0xFF  # a patched byte after pip installed the wheel
    ops.write_bytes(bytes(data))
    unowned = hotfix / "opt" / "app" / "lib"
    unowned.mkdir(parents=True)
    shutil.copyfile(
        hotfix / SITE / "nvidia/cuda_runtime/lib/libcudart.so.12", unowned / "libcudart.so.12"
    )
    image(TAMPERED, hotfix, {"env": "prod", "team": "ml"})

    # A host scanned twice: the CUDA runtime was upgraded in between.
    node = base / "roots" / "gpu-node-07"
    (node / "etc").mkdir(parents=True)
    (node / "etc" / "hostname").write_text("gpu-node-07\n")
    (node / "etc" / "machine-id").write_text("0f0e0d0c0b0a09080706050403020107\n")
    _site(node, good, "9.1.0.70", "12.4.127")
    fleet.reports.append(Report("gpu-node-07", _scan(str(node)), {"env": "prod"}))
    upgraded = _pip_libs((9, 1, 0), 70, "12.6.77", base / "build")
    shutil.rmtree(node / SITE)
    _site(node, upgraded, "9.1.0.70", "12.6.77")
    fleet.reports.append(Report("gpu-node-07", _scan(str(node)), {"env": "prod"}))

    # Report values that must never become markup: the hostname and a directory name.
    hostile = base / "roots" / "hostile"
    (hostile / "etc").mkdir(parents=True)
    (hostile / "etc" / "hostname").write_text(HOSTILE_NAME + "\n")
    (hostile / "etc" / "machine-id").write_text("0f0e0d0c0b0a090807060504030201ff\n")
    lib_dir = hostile / HOSTILE_DIR.lstrip("/")
    lib_dir.mkdir(parents=True)
    shutil.copyfile(
        base / "build" / "cudart-12.4.127" / "libcudart.so.12.4.127",
        lib_dir / "libcudart.so.12.4.127",
    )
    fleet.reports.append(Report(HOSTILE_NAME, _scan(str(hostile)), {"env": "lab"}))
    driver = gpu_node(base / "roots" / "driver-host", driver=DRIVER_VERSION)
    (driver / "etc" / "hostname").write_text(DRIVER_HOST + "\n")
    (driver / "etc" / "machine-id").write_text("0f0e0d0c0b0a09080706050403020112\n")
    # bare metal, as its saved nvidia-smi says: the driver is judged on the datacenter lines
    smi = base / "roots" / "driver-host.smi.xml"
    smi.write_text(nvidia_smi_xml("None").replace(NODE_DRIVER, DRIVER_VERSION))
    fleet.reports.append(
        Report(DRIVER_HOST, _scan(str(driver), "--nvidia-smi-xml", str(smi)), {"env": "prod"})
    )
    fleet.reports.append(
        Report(BIG_HOST, _scan(str(_big_host(base))), {"env": "research", "team": "ml-platform"})
    )
    return fleet


def _big_host(base: Path) -> Path:
    """The root of `BIG_HOST`: `BIG_HOST_FILES` GPU library files under long paths."""
    root = base / "roots" / "big-host"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "hostname").write_text(BIG_HOST + "\n")
    (root / "etc" / "machine-id").write_text("0f0e0d0c0b0a09080706050403020142\n")
    wheel: dict[str, bytes] = {}
    for component in CUDNN9_COMPONENTS:
        # each with the version marker: every file reads as 9.1.0.70, the fleet's cuDNN
        path = build_cudnn_library(base / "build" / "big-cudnn", component, marker=True)
        wheel[f"nvidia/cudnn/lib/{path.name}"] = path.read_bytes()
    for family, directory, version in BIG_HOST_CUDA:
        path = build_cuda_library(base / "build" / f"big-{family}", family, version)
        wheel[f"nvidia/{directory}/lib/{path.name}"] = path.read_bytes()
    for number, env in enumerate(BIG_HOST_ENVS):
        site = root / "opt" / "conda" / "envs" / env / "lib" / "python3.11" / "site-packages"
        if number < 2:  # pip's records: integrity verified
            write_dist_info(site, "nvidia-gpu-stack-cu12", "2024.11", wheel)
        else:  # copied in without a record: unowned
            for rel, data in wheel.items():
                (site / rel).parent.mkdir(parents=True, exist_ok=True)
                (site / rel).write_bytes(data)
    toolkit = root / "usr" / "local" / "cuda-12.4" / "targets" / "x86_64-linux" / "lib"
    toolkit.mkdir(parents=True)
    left = BIG_HOST_FILES - len(BIG_HOST_ENVS) * len(wheel)
    for rel, data in list(wheel.items())[-left:]:
        (toolkit / rel.rpartition("/")[2]).write_bytes(data)
    return root
