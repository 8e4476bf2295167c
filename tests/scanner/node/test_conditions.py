"""A host's condition facts: the Container Toolkit's config.toml (real 1.17.8 defaults and the
settings NVIDIA's bulletins name), CDI specs, GPU architecture and vGPU guest mode, in the scan
result and the BOM; a config that cannot be read decides nothing (hypothesis at the reader's
boundaries: any text is a config or a ConfigError, never a crash or a default)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scanner.advisories.conditions import BadFact, check_fact
from scanner.bom.cyclonedx import to_json, validate_json
from scanner.model import GpuDevice
from scanner.node.conditions import gpu_conditions, toolkit_conditions
from scanner.node.inputs import NodeInputs
from scanner.node.toolkit import CONFIG_PATHS, ConfigError, ToolkitConfig, parse_config
from scanner.pipeline import ScanOptions, run_scan
from tests.scanner.node import nodetree as nt

ETC, OPERATOR = CONFIG_PATHS


def _facts(*configs: str, specs: tuple[str, ...] = ()) -> dict[str, str]:
    parsed = [parse_config(text, f"/c{i}.toml") for i, text in enumerate(configs)]
    return {c.name: c.value for c in toolkit_conditions(parsed, specs)}


def _set(key: str, value: str, text: str = nt.TOOLKIT_CONFIG) -> str:
    """The default config with one key of its file changed (the key's line replaced)."""
    lines = [
        f"{key} = {value}" if line.split(" = ")[0] in (key, "#" + key) else line
        for line in text.splitlines()
    ]
    assert lines != text.splitlines(), key
    return "\n".join(lines) + "\n"


# -- config.toml --------------------------------------------------------------------------------


def test_the_packages_default_config() -> None:
    cfg = parse_config(nt.TOOLKIT_CONFIG, ETC)
    assert cfg == ToolkitConfig(
        source=ETC,
        mode="auto",
        skip_mode_detection=False,
        ldconfig="@/sbin/ldconfig",
        allow_cuda_compat_libs=False,
        cuda_compat_mode="ldconfig",
    )
    # "auto" picks CDI or legacy per container: both paths are reachable
    assert _facts(nt.TOOLKIT_CONFIG) == {
        "cdi_mode": "false|true",
        "ldconfig_from_container": "false",
        "cuda_compat_libs_from_container": "false",
    }


def test_runtime_modes() -> None:
    assert _facts(_set("mode", '"cdi"'))["cdi_mode"] == "true"
    assert _facts(_set("mode", '"jit-cdi"'))["cdi_mode"] == "true"
    # the hook (docker --gpus) runs the legacy path in any mode when told to skip the check
    cdi_hook = _set("skip-mode-detection", "true", _set("mode", '"cdi"'))
    assert _facts(cdi_hook)["cdi_mode"] == "false|true"
    legacy = _set("mode", '"legacy"')
    assert _facts(legacy)["cdi_mode"] == "false"
    # an engine with CDI support reads an NVIDIA spec itself, whatever the runtime's mode
    assert _facts(legacy, specs=("/etc/cdi/nvidia.yaml",))["cdi_mode"] == "false|true"
    # csv (Jetson) and modes the rules do not know decide nothing; the rest still do
    for mode in ('"csv"', '"something-new"'):
        facts = _facts(_set("mode", mode))
        assert "cdi_mode" not in facts and facts["ldconfig_from_container"] == "false"
    # the key absent: the toolkit's default, auto
    no_mode = "\n".join(line for line in nt.TOOLKIT_CONFIG.splitlines() if line != 'mode = "auto"')
    assert _facts(no_mode)["cdi_mode"] == "false|true"


def test_ldconfig_with_and_without_the_host_prefix() -> None:
    assert _facts(_set("ldconfig", '"@/sbin/ldconfig.real"'))["ldconfig_from_container"] == "false"
    assert _facts(_set("ldconfig", '"/sbin/ldconfig"'))["ldconfig_from_container"] == "true"
    # absent: the default @/sbin/ldconfig; empty: undocumented, undecided
    assert _facts("[nvidia-container-cli]\n")["ldconfig_from_container"] == "false"
    assert "ldconfig_from_container" not in _facts(_set("ldconfig", '""'))


def test_cuda_compat_libraries_from_the_container() -> None:
    on = "[features]\nallow-cuda-compat-libs-from-container = true\n"
    assert _facts(nt.TOOLKIT_CONFIG + on)["cuda_compat_libs_from_container"] == "true"
    off = "[features]\nallow-cuda-compat-libs-from-container = false\n"
    assert _facts(nt.TOOLKIT_CONFIG + off)["cuda_compat_libs_from_container"] == "false"
    # 1.17.7+: the legacy path's "mount" mode is the behaviour before the 1.17.4 fix
    mount = _set("cuda-compat-mode", '"mount"')
    assert _facts(mount)["cuda_compat_libs_from_container"] == "true"


def test_two_configs_give_the_union() -> None:
    # the packages' config in CDI mode and the GPU Operator's in legacy mode: either can run
    facts = _facts(_set("mode", '"cdi"'), _set("mode", '"legacy"'))
    assert facts["cdi_mode"] == "false|true"
    both = _facts(_set("ldconfig", '"/sbin/ldconfig"'), nt.TOOLKIT_CONFIG)
    assert both["ldconfig_from_container"] == "false|true"
    # one config that decides nothing leaves the fact undecided for the host
    assert "cdi_mode" not in _facts(nt.TOOLKIT_CONFIG, _set("mode", '"csv"'))


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("[nvidia-container-runtime\nmode = 'cdi'\n", "not TOML"),
        ('[nvidia-container-runtime]\nmode = "cdi"\nmode = "legacy"\n', "not TOML"),
        ("[nvidia-container-runtime]\nmode = 1\n", "mode is a int"),
        ('nvidia-container-runtime = "cdi"\n', "is not a table"),
        ("[features]\nallow-cuda-compat-libs-from-container = 'true'\n", "reads a bool"),
        ("[nvidia-container-runtime-hook]\nskip-mode-detection = 1\n", "reads a bool"),
        ("[nvidia-container-runtime.modes]\nlegacy = 3\n", "is not a table"),
    ],
)
def test_a_config_the_toolkit_could_not_read_is_an_error(text: str, why: str) -> None:
    with pytest.raises(ConfigError, match=why):
        parse_config(text, ETC)


_KEYS = st.sampled_from(
    [
        ("nvidia-container-runtime", "mode"),
        ("nvidia-container-runtime-hook", "skip-mode-detection"),
        ("nvidia-container-cli", "ldconfig"),
        ("features", "allow-cuda-compat-libs-from-container"),
        ("nvidia-container-runtime.modes.legacy", "cuda-compat-mode"),
        ("nvidia-container-runtime", "runtimes"),
    ]
)
_VALUES = (
    st.booleans()
    | st.integers()
    | st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30)
    | st.sampled_from(["auto", "cdi", "legacy", "csv", "jit-cdi", "@/sbin/ldconfig", "mount"])
    | st.lists(st.text(max_size=5), max_size=3)
)


@given(st.lists(st.tuples(_KEYS, _VALUES), max_size=6))
@settings(max_examples=300, deadline=None)
def test_any_setting_decides_by_the_rules_or_refuses(
    pairs: list[tuple[tuple[str, str], Any]],
) -> None:
    by_table: dict[str, dict[str, Any]] = {}
    for (table, key), value in pairs:
        by_table.setdefault(table, {})[key] = value

    # TOML basic strings and arrays are JSON's, control characters escaped (DEL by hand) and
    # other characters raw (JSON's surrogate-pair escapes are no TOML); booleans are lowercase
    def toml(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")

    text = "".join(
        f"[{table}]\n" + "".join(f"{k} = {toml(v)}\n" for k, v in keys.items())
        for table, keys in by_table.items()
    )
    try:
        cfg = parse_config(text, ETC)
    except ConfigError:
        wanted = {
            ("nvidia-container-runtime", "mode"): str,
            ("nvidia-container-runtime-hook", "skip-mode-detection"): bool,
            ("nvidia-container-cli", "ldconfig"): str,
            ("features", "allow-cuda-compat-libs-from-container"): bool,
            ("nvidia-container-runtime.modes.legacy", "cuda-compat-mode"): str,
        }
        # refused only for a key of another type than the toolkit reads
        assert any(
            (t, k) in wanted and not isinstance(v, wanted[(t, k)])
            for t, keys in by_table.items()
            for k, v in keys.items()
        )
        return
    facts = {c.name: c for c in toolkit_conditions([cfg], ())}
    ldconfig = by_table.get("nvidia-container-cli", {}).get("ldconfig")
    if ldconfig == "":
        assert "ldconfig_from_container" not in facts
    else:
        want = "true" if ldconfig is not None and not ldconfig.startswith("@") else "false"
        assert facts["ldconfig_from_container"].value == want
    mode = by_table.get("nvidia-container-runtime", {}).get("mode", "auto")
    expected = {"cdi": "true", "jit-cdi": "true", "legacy": "false", "auto": "false|true"}
    if by_table.get("nvidia-container-runtime-hook", {}).get("skip-mode-detection"):
        expected.update({"cdi": "false|true", "jit-cdi": "false|true"})
    got = facts.get("cdi_mode")
    assert (got.value if got else None) == expected.get(mode)
    for fact in facts.values():
        assert check_fact(fact.name, fact.value) == fact.value


@given(
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=400)
    | st.sampled_from(
        [nt.TOOLKIT_CONFIG[:cut] for cut in range(0, len(nt.TOOLKIT_CONFIG), 37)]
        + [nt.TOOLKIT_CONFIG.replace("=", "", 1), nt.TOOLKIT_CONFIG.replace("]", "", 3)]
    )
)
@settings(max_examples=300, deadline=None)
def test_malformed_text_is_a_config_error_never_a_crash(text: str) -> None:
    try:
        cfg = parse_config(text, ETC)
    except ConfigError:
        return
    # what parses is a config whose facts are all of their condition's form
    for fact in toolkit_conditions([cfg], ()):
        assert check_fact(fact.name, fact.value) == fact.value


@given(
    st.binary(max_size=300)
    | st.sampled_from(
        [
            nt.TOOLKIT_CONFIG.encode()[:cut] + tail
            for cut in range(0, len(nt.TOOLKIT_CONFIG), 53)
            for tail in (b"", b"\xff\xfe", b"\x00", b"[[")
        ]
    )
)
@settings(max_examples=200, deadline=None)
def test_any_bytes_in_the_config_file_decide_by_the_rules_or_nothing(data: bytes) -> None:
    import tempfile

    from scanner.node.conditions import read_configs
    from scanner.node.rootfs import Root

    with tempfile.TemporaryDirectory() as tmp:
        nt.write(Path(tmp), ETC, data)
        notes: list[str] = []
        configs, ok = read_configs(Root(tmp), notes)
    if not ok:
        # unreadable as the toolkit reads it: undecided, said in a note, never a default
        assert configs == [] and len(notes) == 1 and notes[0].startswith(f"toolkit-config: {ETC}:")
        return
    (cfg,) = configs
    assert notes == []
    for fact in toolkit_conditions(configs, ()):
        assert check_fact(fact.name, fact.value) == fact.value
    assert cfg == parse_config(data.decode("utf-8"), ETC)  # only valid UTF-8 is read


# -- GPUs ---------------------------------------------------------------------------------------


def _gpu(model: str, **kw: Any) -> GpuDevice:
    return GpuDevice(bus_id="0000:17:00.0", model=model, source="nvidia-smi", **kw)


def test_vgpu_guest_from_the_virtualization_mode() -> None:
    def guest(*modes: str | None) -> str | None:
        gpus = [_gpu("NVIDIA A10-24Q", virtualization=m) for m in modes]
        return {c.name: c.value for c in gpu_conditions(gpus)}.get("vgpu_guest")

    assert guest("VGPU") == "true"
    assert guest("None", "VGPU") == "true"
    assert guest("None", "None") == "false"
    assert guest("Host VGPU") == "false"  # the hypervisor's GPU: no guest
    # a passed-through GPU runs either driver; an unknown mode says nothing
    assert guest("Pass-Through") is None
    assert guest("None", None) is None
    assert gpu_conditions([]) == []


def test_vgpu_host_from_the_virtualization_mode() -> None:
    def host(*modes: str | None) -> str | None:
        gpus = [_gpu("NVIDIA L40S", virtualization=m) for m in modes]
        return {c.name: c.value for c in gpu_conditions(gpus)}.get("vgpu_host")

    # a hypervisor's GPU, driven by the vGPU Manager (VMware's shared graphics too)
    assert host("Host VGPU") == "true"
    assert host("None", "Host VGPU") == "true"
    assert host("Host VSGA") == "true"
    assert host("Host VGPU", None) == "true"
    # bare metal, a guest's vGPU, a passed-through GPU: no vGPU Manager
    assert host("None") == "false"
    assert host("VGPU") == "false"
    assert host("Pass-Through", "None") == "false"
    # an unknown mode says nothing
    assert host("None", None) is None
    assert host("Something New") is None
    (fact,) = [
        c
        for c in gpu_conditions([_gpu("L40S", virtualization="Host VGPU")])
        if c.name == "vgpu_host"
    ]
    assert fact.source == "nvidia-smi: 0000:17:00.0 virtualization mode Host VGPU"


def test_gpu_architecture_from_nvidia_smi_or_the_compute_capability() -> None:
    def arch(*gpus: GpuDevice) -> str | None:
        return {c.name: c.value for c in gpu_conditions(gpus)}.get("gpu_architecture")

    assert arch(_gpu("NVIDIA H100 80GB HBM3", architecture="Hopper")) == "hopper"
    assert arch(_gpu("NVIDIA L4", architecture="Ada Lovelace")) == "ada-lovelace"
    assert arch(_gpu("NVIDIA A100-SXM4-80GB", compute_capability="8.0")) == "ampere"
    mixed = (
        _gpu("NVIDIA A100-SXM4-80GB", compute_capability="8.0"),
        _gpu("Tesla T4", compute_capability="7.5"),
    )
    assert arch(*mixed) == "ampere|turing"
    # NVIDIA's R470 rows name GeForce Kepler desktop parts; notebook parts end in M
    assert arch(_gpu("NVIDIA GeForce GTX 780", architecture="Kepler")) == "kepler|kepler-desktop"
    assert arch(_gpu("NVIDIA GeForce GTX 680M", architecture="Kepler")) == "kepler"
    assert arch(_gpu("Tesla K80", compute_capability="3.7")) == "kepler"
    # one GPU of unknown architecture: the host's set is unknown
    assert arch(_gpu("NVIDIA H100 80GB HBM3", architecture="Hopper"), _gpu("Mystery")) is None


# -- a scan of a node root ----------------------------------------------------------------------


def _scan(root: Path, tmp_path: Path, **node: Any) -> Any:
    return run_scan(str(root), ScanOptions(cache_dir=tmp_path / "cache", node=NodeInputs(**node)))


def _props(component: dict[str, Any]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for p in component.get("properties", []):
        out.setdefault(p["name"], []).append(p["value"])
    return out


def test_a_node_scan_reports_its_conditions_in_the_bom(tmp_path: Path) -> None:
    root = nt.gpu_node(tmp_path / "root")
    nt.write(root, ETC, _set("mode", '"cdi"'))
    smi = nt.write(tmp_path, "/smi.xml", nt.nvidia_smi_xml("None"))
    result = _scan(root, tmp_path, nvidia_smi_xml=str(smi))
    got = {c.name: (c.value, c.source) for c in result.node.conditions}
    assert {k: v for k, (v, _) in got.items()} == {
        "cdi_mode": "true",
        "cuda_compat_libs_from_container": "false",
        "gpu_architecture": "hopper",
        "ldconfig_from_container": "false",
        "vgpu_guest": "false",
        "vgpu_host": "false",
    }
    assert got["cdi_mode"][1] == f'{ETC}: nvidia-container-runtime.mode = "cdi"'
    document = to_json(result)
    assert validate_json(document, "1.6") is None
    asset = _props(json.loads(document)["metadata"]["component"])
    assert asset["gpuprov:condition:cdi_mode"] == ["true"]
    assert asset["gpuprov:condition:cdi_mode:source"] == [got["cdi_mode"][1]]
    assert asset["gpuprov:condition:vgpu_guest"] == ["false"]


def test_the_gpu_operators_config_counts_too(tmp_path: Path) -> None:
    root = nt.gpu_node(tmp_path / "root")
    nt.write(root, ETC, _set("mode", '"cdi"'))
    nt.write(root, OPERATOR, _set("ldconfig", '"/sbin/ldconfig"', _set("mode", '"legacy"')))
    facts = {c.name: c for c in _scan(root, tmp_path).node.conditions}
    # legacy with the root's NVIDIA CDI spec present, and CDI: both paths
    assert facts["cdi_mode"].value == "false|true"
    assert "/etc/cdi/nvidia.yaml" in facts["cdi_mode"].source
    assert facts["ldconfig_from_container"].value == "false|true"
    assert OPERATOR in facts["ldconfig_from_container"].source


def _fifo(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)  # never read: a FIFO planted in a root must not block the scan


@pytest.mark.parametrize(
    "make",
    [
        lambda root: nt.write(root, ETC, "[nvidia-container-runtime\nmode = 'cdi'\n"),
        lambda root: nt.write(root, ETC, "[nvidia-container-runtime]\nmode = 5\n"),
        lambda root: (root / ETC.lstrip("/")).mkdir(parents=True),
        lambda root: nt.write(root, ETC, "#" * ((1 << 20) + 1)),
        lambda root: _fifo(root / ETC.lstrip("/")),
        lambda root: nt.write(root, ETC, nt.TOOLKIT_CONFIG.encode() + b"# \xff\n"),
    ],
    ids=["not-toml", "wrong-type", "a-directory", "too-large", "a-fifo", "not-utf-8"],
)
def test_a_config_that_cannot_be_read_decides_nothing(tmp_path: Path, make: Any) -> None:
    root = nt.gpu_node(tmp_path / "root")
    # the operator's config alone would decide: the unreadable one beside it makes it unknown
    nt.write(root, OPERATOR, _set("mode", '"cdi"'))
    make(root)
    node = _scan(root, tmp_path).node
    names = {c.name for c in node.conditions}
    assert names.isdisjoint(
        {"cdi_mode", "ldconfig_from_container", "cuda_compat_libs_from_container"}
    )
    assert any(n.startswith(f"toolkit-config: {ETC}: ") for n in node.notes)


def test_no_config_no_toolkit_conditions(tmp_path: Path) -> None:
    root = nt.gpu_node(tmp_path / "root")
    node = _scan(root, tmp_path).node
    # /proc GPUs: the architecture from the model's compute capability, no virtualization mode
    assert {c.name: c.value for c in node.conditions} == {"gpu_architecture": "hopper"}
    assert not any(n.startswith("toolkit-config") for n in node.notes)


def test_a_config_outside_the_root_is_never_read(tmp_path: Path) -> None:
    # /etc/nvidia-container-runtime is a link out of the root: resolved inside it, so absent
    root = nt.gpu_node(tmp_path / "root")
    outside = nt.write(tmp_path, "/outside/config.toml", _set("mode", '"cdi"'))
    (root / "etc/nvidia-container-runtime").symlink_to(outside.parent)
    node = _scan(root, tmp_path).node
    assert "cdi_mode" not in {c.name for c in node.conditions}


def test_check_fact_forms() -> None:
    assert check_fact("cdi_mode", "true|false") == "false|true"
    assert check_fact("gpu_architecture", "hopper|ada-lovelace") == "ada-lovelace|hopper"
    for name, bad in (
        ("cdi_mode", "yes"),
        ("cdi_mode", ""),
        ("cdi_mode", "true|true"),
        ("vgpu_guest", "TRUE"),
        ("gpu_architecture", "Hopper"),
        ("gpu_architecture", "a" * 40),
        ("gpu_architecture", "|".join(f"a{i}" for i in range(17))),
    ):
        with pytest.raises(BadFact):
            check_fact(name, bad)


@pytest.mark.parametrize(
    "grid", ["/usr/lib/x86_64-linux-gnu/nvidia/gridd", "/usr/bin/nvidia-gridd"]
)
def test_the_guest_drivers_licensing_daemon_decides_what_the_gpus_leave_open(
    tmp_path: Path, grid: str
) -> None:
    """A passed-through GPU runs either driver: the vGPU guest driver's nvidia-gridd (what
    NVIDIA's driver container starts for its vgpu driver type) says which one is installed; it
    never overrules a GPU's own virtualization mode."""

    def guest(smi_mode: str | None, with_grid: bool) -> tuple[str, str] | None:
        case = tmp_path / f"{smi_mode!r}-{with_grid}"
        root = nt.gpu_node(case / "root")
        if with_grid:
            nt.write(
                root, grid + ("/libstand-in.so" if grid.endswith("/nvidia/gridd") else ""), b"x"
            )
        node: dict[str, Any] = {}
        if smi_mode is not None:
            node["nvidia_smi_xml"] = str(nt.write(case, "/smi.xml", nt.nvidia_smi_xml(smi_mode)))
        result = _scan(root, case, **node)
        got = {c.name: (c.value, c.source) for c in result.node.conditions}
        return got.get("vgpu_guest")

    decided = guest("Pass-Through", True)
    assert decided is not None and decided[0] == "true"
    assert decided[1].startswith(grid + ": the vGPU guest driver's licensing daemon")
    assert guest("Pass-Through", False) is None
    assert guest(None, True) is not None  # no nvidia-smi output: the daemon still says
    assert guest("None", True) == ("false", guest("None", False)[1])  # type: ignore[index]
