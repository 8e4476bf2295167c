"""Container and pod ids from ``/proc/PID/cgroup``, on recorded real formats.

Each example is a real file's content (or line) as the engine writes it; where it came from is
named beside it, and the formats are listed in docs/cli.md (Runtime). The ids are kept as
recorded.
"""

from __future__ import annotations

import pytest

from scanner.runtime.cgroup import ContainerRef, parse_cgroup, parse_path

K8S_V1_CGROUPFS = """\
11:devices:/kubepods/besteffort/pod74ba62da-1a3d-11e7-bb11-080027cb0e22/cb1eadb7abe3a6545e9856411207073277838e1bdc003337c2f8685faeedc32c
10:memory:/kubepods/besteffort/pod74ba62da-1a3d-11e7-bb11-080027cb0e22/cb1eadb7abe3a6545e9856411207073277838e1bdc003337c2f8685faeedc32c
6:pids:/kubepods/besteffort/pod74ba62da-1a3d-11e7-bb11-080027cb0e22/cb1eadb7abe3a6545e9856411207073277838e1bdc003337c2f8685faeedc32c
1:name=systemd:/kubepods/besteffort/pod74ba62da-1a3d-11e7-bb11-080027cb0e22/cb1eadb7abe3a6545e9856411207073277838e1bdc003337c2f8685faeedc32c
"""  # Kubernetes, cgroup v1, cgroupfs driver, docker (neuvector share/system/cgroup_test.go)

K8S_V1_SYSTEMD_DOCKER = """\
11:cpuset:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod045b1e35_7f13_11e7_ac42_0050568ffca0.slice/docker-b5b6f2da8008be266864f896f93789762b2ce50792114a5c5f2cc3315af0bc70.scope
8:memory:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod045b1e35_7f13_11e7_ac42_0050568ffca0.slice/docker-b5b6f2da8008be266864f896f93789762b2ce50792114a5c5f2cc3315af0bc70.scope
1:name=systemd:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod045b1e35_7f13_11e7_ac42_0050568ffca0.slice/docker-b5b6f2da8008be266864f896f93789762b2ce50792114a5c5f2cc3315af0bc70.scope
"""  # Kubernetes, cgroup v1, systemd driver, docker (same source)

K8S_V1_SYSTEMD_CONTAINERD = """\
11:cpuset:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-poddd1bf9d1_241d_47f5_8e25_12de83135812.slice/cri-containerd-f45298cd514d1930c4fe3afc4412e59547f7e3148fddd22ca33cefce046eb830.scope
5:memory:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-poddd1bf9d1_241d_47f5_8e25_12de83135812.slice/cri-containerd-f45298cd514d1930c4fe3afc4412e59547f7e3148fddd22ca33cefce046eb830.scope
"""  # Bottlerocket: Kubernetes, cgroup v1, systemd driver, containerd (same source)

DOCKER_V1_CGROUPFS = """\
12:name=systemd:/docker/31cb02944da7a12196a193cf0e0f6c226d7c453a1db62e65ba98287593a2ee30
4:memory:/docker/31cb02944da7a12196a193cf0e0f6c226d7c453a1db62e65ba98287593a2ee30
1:cpuset:/docker/31cb02944da7a12196a193cf0e0f6c226d7c453a1db62e65ba98287593a2ee30
"""  # plain docker on Ubuntu, cgroup v1, cgroupfs driver (same source)

DOCKER_V1_SYSTEMD = """\
8:memory:/system.slice/docker-9ec39b91f3d70e1beff50a308f77067065ea6be0d91a3378375056cd4422cf3d.scope
1:name=systemd:/system.slice/docker-9ec39b91f3d70e1beff50a308f77067065ea6be0d91a3378375056cd4422cf3d.scope
"""  # plain docker on CentOS, cgroup v1, systemd driver (same source)

DOCKER_IN_DOCKER = """\
8:memory:/docker/a9a5ad238e59234193ee7ec3fcff5e735b3708ea1068826952255b69e3cfa413/docker/ec08435e04266c5ba381fccbb829f626d11d8ddf5f8f547263c7a2d79ab4787a
"""  # RancherOS, docker in docker (same source): the innermost container

K8S_PROXY_SUBGROUP = """\
10:memory:/kubepods/besteffort/podf8a694f2-7c08-11e9-98da-000c29077430/c04e0a88a1de067f25bece337d4dbb897396e0b623c2a65330850fc9823f1903/kube-proxy
"""  # a container's own sub-cgroup (kube-proxy, same source)

HOST_V1 = """\
13:name=systemd:/
5:memory:/
1:cpuset:/
"""  # a host process, cgroup v1 (same source)

HYBRID_HOST = """\
9:name=systemd:/
4:memory:/process_api/522aa618bfa8051941bb6dd900d85a23
0::/
"""  # this project's build machine: v1 controllers and the v2 line, no container


def test_kubernetes_cgroup_v1_cgroupfs() -> None:
    assert parse_cgroup(K8S_V1_CGROUPFS) == ContainerRef(
        "cb1eadb7abe3a6545e9856411207073277838e1bdc003337c2f8685faeedc32c",
        None,  # the cgroupfs driver's bare id does not say which engine
        "74ba62da-1a3d-11e7-bb11-080027cb0e22",
        "/kubepods/besteffort/pod74ba62da-1a3d-11e7-bb11-080027cb0e22/"
        "cb1eadb7abe3a6545e9856411207073277838e1bdc003337c2f8685faeedc32c",
    )


def test_kubernetes_systemd_driver_docker_and_containerd() -> None:
    docker = parse_cgroup(K8S_V1_SYSTEMD_DOCKER)
    assert (docker.container_id, docker.engine, docker.pod_uid) == (
        "b5b6f2da8008be266864f896f93789762b2ce50792114a5c5f2cc3315af0bc70",
        "docker",
        "045b1e35-7f13-11e7-ac42-0050568ffca0",  # the slice's underscores are the uid's dashes
    )
    containerd = parse_cgroup(K8S_V1_SYSTEMD_CONTAINERD)
    assert (containerd.container_id, containerd.engine, containerd.pod_uid) == (
        "f45298cd514d1930c4fe3afc4412e59547f7e3148fddd22ca33cefce046eb830",
        "containerd",
        "dd1bf9d1-241d-47f5-8e25-12de83135812",
    )


def test_plain_docker_both_drivers_and_nested() -> None:
    cgroupfs = parse_cgroup(DOCKER_V1_CGROUPFS)
    assert (cgroupfs.container_id, cgroupfs.engine, cgroupfs.pod_uid) == (
        "31cb02944da7a12196a193cf0e0f6c226d7c453a1db62e65ba98287593a2ee30",
        "docker",
        None,
    )
    systemd = parse_cgroup(DOCKER_V1_SYSTEMD)
    assert (systemd.container_id, systemd.engine) == (
        "9ec39b91f3d70e1beff50a308f77067065ea6be0d91a3378375056cd4422cf3d",
        "docker",
    )
    nested = parse_cgroup(DOCKER_IN_DOCKER)
    assert nested.container_id == "ec08435e04266c5ba381fccbb829f626d11d8ddf5f8f547263c7a2d79ab4787a"
    sub = parse_cgroup(K8S_PROXY_SUBGROUP)
    assert sub.container_id == "c04e0a88a1de067f25bece337d4dbb897396e0b623c2a65330850fc9823f1903"
    assert sub.pod_uid == "f8a694f2-7c08-11e9-98da-000c29077430"


CTR = "06dc5f321aad8726aa26559f16ec203bc099245bc44894b14a89fc02b022d1d5"
POD = (
    "kubepods.slice/kubepods-burstable.slice/"
    "kubepods-burstable-pod6ec0e3a2_3f0b_4a4e_9a4e_0d1f4b2c9e11.slice"
)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        # cgroup v2, Kubernetes systemd driver, containerd
        (f"0::/{POD}/cri-containerd-{CTR}.scope", (CTR, "containerd", True)),
        # cgroup v2, Kubernetes systemd driver, CRI-O (the container, then its conmon monitor)
        (f"0::/{POD}/crio-{CTR}.scope", (CTR, "cri-o", True)),
        (f"0::/{POD}/crio-{CTR}.scope/container", (CTR, "cri-o", True)),
        (f"0::/{POD}/crio-conmon-{CTR}.scope", (None, None, True)),
        # cgroup v2, podman rootful (with its "container" sub-cgroup) and its conmon
        (f"0::/machine.slice/libpod-{CTR}.scope/container", (CTR, "podman", False)),
        (f"0::/machine.slice/libpod-conmon-{CTR}.scope", (None, None, False)),
        # podman rootless, and podman's cgroupfs parent
        (
            f"0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-{CTR}.scope",
            (CTR, "podman", False),
        ),
        (f"0::/libpod_parent/libpod-{CTR}", (CTR, "podman", False)),
        # cgroup v2, docker systemd driver and cgroupfs driver
        (f"0::/system.slice/docker-{CTR}.scope", (CTR, "docker", False)),
        (f"0::/docker/{CTR}", (CTR, "docker", False)),
        # containerd without Kubernetes (ctr run: /<namespace>/<id>)
        (f"0::/default/{CTR}", (CTR, None, False)),
        # kind / kubelet in a container: kubelet-kubepods slices
        (
            "0::/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/"
            "kubelet-kubepods-besteffort-pod6ec0e3a2_3f0b_4a4e_9a4e_0d1f4b2c9e11.slice/"
            f"cri-containerd-{CTR}.scope",
            (CTR, "containerd", True),
        ),
        # host processes
        ("0::/system.slice/sshd.service", (None, None, False)),
        ("0::/user.slice/user-1000.slice/session-3.scope", (None, None, False)),
        ("0::/init.scope", (None, None, False)),
    ],
)
def test_formats(line: str, expected: tuple[str | None, str | None, bool]) -> None:
    ref = parse_cgroup(line + "\n")
    pod = "6ec0e3a2-3f0b-4a4e-9a4e-0d1f4b2c9e11" if expected[2] else None
    assert (ref.container_id, ref.engine, ref.pod_uid) == (expected[0], expected[1], pod)


def test_static_pod_uid_without_dashes() -> None:
    # a static pod's uid is the 32-hex hash of its manifest
    ref = parse_path(f"/kubepods/burstable/pod9d7c0f3a1b2c4d5e6f708192a3b4c5d6/{CTR}")
    assert ref.pod_uid == "9d7c0f3a1b2c4d5e6f708192a3b4c5d6"
    assert ref.container_id == CTR


def test_host_and_garbage() -> None:
    assert parse_cgroup(HOST_V1).container_id is None
    assert parse_cgroup(HYBRID_HOST) == ContainerRef(None, None, None, "/")
    assert parse_cgroup("") == ContainerRef()
    assert parse_cgroup("not a cgroup file\n\x00\x01") == ContainerRef()
    # an id one digit short, or not hex, is no container id
    assert parse_path("/docker/" + CTR[:-1]).container_id is None
    assert parse_path("/docker/" + CTR[:-1] + "g").container_id is None


def test_v2_line_decides_on_a_hybrid_host() -> None:
    other = "f" * 64
    text = f"4:memory:/docker/{other}\n0::/system.slice/docker-{CTR}.scope\n"
    assert parse_cgroup(text).container_id == CTR
