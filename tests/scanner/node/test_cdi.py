"""CDI specs in the nvidia-ctk schema and the legacy nvidia-container-cli list."""

from __future__ import annotations

import pytest

from scanner.node.cdi import CdiError, parse_legacy_list, parse_spec
from tests.scanner.node import nodetree as nt

LIB = nt.LIB
DRIVER = nt.DRIVER


@pytest.mark.parametrize("as_json", [False, True])
def test_nvidia_ctk_spec(as_json: bool) -> None:
    text = nt.cdi_spec()
    if as_json:
        text = nt.as_json_spec(text)
    inj = parse_spec(text, "cdi:/etc/cdi/nvidia.yaml")
    libcuda = f"{LIB}/libcuda.so.{DRIVER}"
    assert inj.mounts[libcuda] == ({libcuda}, {"nvidia.com/gpu=*"})
    assert "/run/nvidia-persistenced/socket" in inj.mounts
    assert "/usr/bin/nvidia-smi" in inj.mounts
    assert inj.device_nodes == {
        "/dev/nvidia-modeset",
        "/dev/nvidia-uvm",
        "/dev/nvidia-uvm-tools",
        "/dev/nvidiactl",
        "/dev/nvidia0",
        "/dev/nvidia1",
    }
    assert inj.links == {
        (f"{LIB}/libcuda.so", "libcuda.so.1"),
        (f"{LIB}/libnvidia-ml.so", "libnvidia-ml.so.1"),
    }


def test_device_level_mounts_name_their_device() -> None:
    spec = (
        "cdiVersion: 0.6.0\nkind: nvidia.com/gpu\ndevices:\n- name: '0'\n  containerEdits:\n"
        "    mounts:\n    - hostPath: /dev/dri/card1\n      containerPath: /dev/dri/card1\n"
    )
    inj = parse_spec(spec, "s")
    assert inj.mounts["/dev/dri/card1"] == ({"/dev/dri/card1"}, {"nvidia.com/gpu=0"})


def test_older_nvidia_ctk_hook_form() -> None:
    # Container Toolkit 1.12-1.14 ran the hooks as `nvidia-ctk hook create-symlinks --link=...`
    spec = (
        "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ncontainerEdits:\n  hooks:\n"
        "  - hookName: createContainer\n    path: /usr/bin/nvidia-ctk\n    args:\n"
        "    - nvidia-ctk\n    - hook\n    - create-symlinks\n"
        "    - --link=../libnvidia-allocator.so.1::"
        "/usr/lib/x86_64-linux-gnu/gbm/nvidia-drm_gbm.so\n"
        "devices:\n- name: all\n  containerEdits:\n    deviceNodes:\n    - path: /dev/nvidia0\n"
    )
    inj = parse_spec(spec, "s")
    assert inj.links == {
        ("/usr/lib/x86_64-linux-gnu/gbm/nvidia-drm_gbm.so", "../libnvidia-allocator.so.1")
    }


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("{not json", "not YAML or JSON"),
        ("- a list\n", "no mapping"),
        ("kind: nvidia.com/gpu\n", "cdiVersion"),
        ("cdiVersion: 0.5.0\nkind: gpu\n", "vendor/class"),
        (
            "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ncontainerEdits:\n  mounts:\n"
            "  - hostPath: relative/x\n    containerPath: /x\n",
            "no absolute path",
        ),
        ("cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices: 3\n", "expected a list"),
        ("cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- containerEdits: {}\n", "name"),
        ("cdiVersion: 0.5.0\nkind: nvidia.com/gpu\nkind: x/y\n", "duplicate key 'kind'"),
        ('{"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu", "kind": "x/y"}', "duplicate key"),
        ("cdiVersion: " + "9" * 5000 + "\n", "an integer of 5000 digits"),
    ],
)
def test_bad_specs_say_why(text: str, why: str) -> None:
    with pytest.raises(CdiError, match=why):
        parse_spec(text, "s")


def test_legacy_list() -> None:
    inj = parse_legacy_list(nt.container_cli_list())
    assert "/dev/nvidia0" in inj.device_nodes and "/dev/nvidiactl" in inj.device_nodes
    assert inj.mounts[f"{LIB}/libcuda.so.{DRIVER}"] == (set(), set())
    assert len(inj.mounts) == 7
    with pytest.raises(CdiError, match="line 2"):
        parse_legacy_list("/dev/nvidia0\nNVRM version: NVIDIA UNIX\n")
