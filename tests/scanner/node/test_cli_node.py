"""`gpuprov scan ROOT` on a GPU node: the node options, the table's node lines, usage errors."""

from __future__ import annotations

import json
from pathlib import Path

from tests.scanner.node import nodetree as nt
from tests.scanner.test_cli import invoke


def test_scan_with_node_options(tmp_path: Path) -> None:
    root = nt.gpu_node(tmp_path / "root")
    smi = nt.write(tmp_path, "/smi.xml", nt.NVIDIA_SMI_XML)
    listing = nt.write(tmp_path, "/list.txt", nt.container_cli_list())
    spec = nt.write(tmp_path, "/extra.json", nt.as_json_spec(nt.cdi_spec()))
    cache = str(tmp_path / "c")
    args = ["scan", str(root), "--cache-dir", cache, "--nvidia-smi-xml", str(smi)]
    args += ["--container-cli-list", str(listing), "--cdi-spec", str(spec)]
    result = invoke([*args, "-f", "cyclonedx"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    names = {p["name"] for p in doc["metadata"]["component"]["properties"]}
    assert {"gpuprov:driver:version", "gpuprov:driver:cuda-max", "gpuprov:gpu:count"} <= names
    result = invoke([*args, "-f", "table"])
    assert result.exit_code == 0, result.output
    assert f"driver: {nt.DRIVER} (proprietary kernel module), runs CUDA <= 12.2" in result.stdout
    assert "gpus: 2 x NVIDIA H100 80GB HBM3 (cc 9.0)" in result.stdout
    assert "container injection: 8 host file(s) from cdi:" in result.stdout
    # no toolkit config in this root: only the GPUs' architecture is decided
    assert "conditions: gpu_architecture=hopper" in result.stdout
    result = invoke(["scan", str(root), "--cache-dir", cache, "--no-node-facts", "-f", "json"])
    assert json.loads(result.stdout)["node"] is None


def test_node_options_usage_errors(tmp_path: Path) -> None:
    root = nt.gpu_node(tmp_path / "root")
    result = invoke(["scan", str(root), "--nvidia-smi-xml", str(tmp_path / "nope.xml")])
    assert result.exit_code == 2
    assert "cannot read nvidia-smi -q -x output" in result.output
    bad = nt.write(tmp_path, "/bad.txt", "not a list\n")
    result = invoke(["scan", str(root), "--container-cli-list", str(bad)])
    assert result.exit_code == 2 and "line 1" in result.output
    result = invoke(["scan", "oci:/nonexistent-layout", "--no-node-facts"])
    assert result.exit_code == 2
    assert "--no-node-facts only applies to host directory targets" in result.output


def test_a_malformed_cdi_spec_option_is_a_usage_error_and_one_in_the_root_a_note(
    tmp_path: Path,
) -> None:
    """A --cdi-spec file that is missing, no YAML, or of the wrong shape: exit 2 naming the
    file and the fault; the same bytes in the root's /etc/cdi: a node note, the scan done."""
    root = tmp_path / "root"
    (root / "etc" / "cdi").mkdir(parents=True)
    unclosed = 'cdiVersion: "0.5.0"\nkind: nvidia.com/gpu\ndevices: [\n'
    cases = {
        "unclosed.yaml": (unclosed, "not YAML or JSON"),
        "shape.yaml": (
            'cdiVersion: "0.5.0"\nkind: nvidia.com/gpu\ncontainerEdits: {deviceNodes: "x"}\n'
            "devices: []\n",
            "containerEdits.deviceNodes: expected a list, got str",
        ),
        "binary.yaml": ("\x00\x01garbage", "not YAML or JSON"),
    }
    for name, (text, fault) in cases.items():
        spec = nt.write(tmp_path, f"/{name}", text)
        result = invoke(["scan", str(root), "--no-cache", "--cdi-spec", str(spec), "-f", "json"])
        assert result.exit_code == 2, result.output
        assert f"{spec}: not a CDI spec: {fault}" in result.output
        assert "Traceback" not in result.output
    result = invoke(["scan", str(root), "--no-cache", "--cdi-spec", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 2 and "cannot read a CDI spec" in result.output
    nt.write(root, "/etc/cdi/bad.yaml", unclosed)
    result = invoke(["scan", str(root), "--no-cache", "-f", "json"])
    assert result.exit_code == 0, result.output
    [note] = json.loads(result.stdout)["node"]["notes"]
    assert note.startswith("cdi: /etc/cdi/bad.yaml: not YAML or JSON")
