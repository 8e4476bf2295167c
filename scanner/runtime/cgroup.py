"""A process's container and Kubernetes pod from its ``/proc/PID/cgroup`` text.

Pure string parsing of the formats container engines give their cgroups (cgroup v1 and v2,
the cgroupfs and systemd drivers); each recorded in docs/cli.md (Runtime) with a real example
and tested in tests/scanner/runtime/test_cgroup.py. Nothing here reads a file.
"""

from __future__ import annotations

import re
from typing import Final

from msgspec import Struct

#: ``<engine>-<id>.scope`` (systemd driver) or ``<engine>-<id>`` (podman's cgroupfs parent).
_SCOPE: Final = re.compile(
    r"^(?P<engine>docker|cri-containerd|crio|libpod)-(?P<id>[0-9a-f]{64})(?:\.scope)?$"
)
#: conmon and other monitors get a cgroup of their own next to the container's: not in it.
_MONITOR: Final = re.compile(r"^(?:crio-conmon|libpod-conmon)-[0-9a-f]{64}(?:\.scope)?$")
#: a bare 64-hex directory: docker's and Kubernetes' cgroupfs driver, ``ctr run``.
_BARE: Final = re.compile(r"^[0-9a-f]{64}$")
#: the pod's own cgroup: ``pod<uid>`` (cgroupfs) or ``kubepods[-qos]-pod<uid>.slice`` (systemd,
#: the uid's dashes written as underscores); static pods' uids are 32 hex digits.
_POD: Final = re.compile(
    r"^(?:pod|(?:kubelet-)?kubepods(?:-[a-z]+)?-pod)(?P<uid>[0-9a-f]{8}[_-]?[0-9a-f]{4}[_-]?"
    r"[0-9a-f]{4}[_-]?[0-9a-f]{4}[_-]?[0-9a-f]{12})(?:\.slice)?$"
)
_ENGINES: Final = {
    "docker": "docker",
    "cri-containerd": "containerd",
    "crio": "cri-o",
    "libpod": "podman",
}


class ContainerRef(Struct, frozen=True):
    """Where a process runs: its container (None on the host) and Kubernetes pod."""

    container_id: str | None = None
    #: "docker", "containerd", "cri-o", "podman"; None when the path does not say (cgroupfs)
    engine: str | None = None
    pod_uid: str | None = None
    #: the cgroup path the answer was read from
    cgroup: str | None = None


def _pod_uid(segment: str) -> str | None:
    m = _POD.match(segment)
    if m is None:
        return None
    return m.group("uid").replace("_", "-")


def parse_path(path: str) -> ContainerRef:
    """The container and pod of one cgroup path (``/kubepods/burstable/pod<uid>/<id>``)."""
    container: str | None = None
    engine: str | None = None
    pod: str | None = None
    segments = [s for s in path.split("/") if s]
    for i, segment in enumerate(segments):
        if (uid := _pod_uid(segment)) is not None:
            pod = uid
            continue
        if _MONITOR.match(segment):
            # a monitor of a container is not in it; what it nests is (nothing, in practice)
            container, engine = None, None
            continue
        if (m := _SCOPE.match(segment)) is not None:
            # the innermost container wins (docker in docker: /docker/<a>/docker/<b>)
            container, engine = m.group("id"), _ENGINES[m.group("engine")]
        elif _BARE.match(segment):
            parent = segments[i - 1] if i else ""
            container = segment
            engine = "docker" if parent == "docker" else None
    return ContainerRef(container, engine, pod, path)


def parse_cgroup(text: str) -> ContainerRef:
    """The container and pod a ``/proc/PID/cgroup`` file places its process in.

    Each line is ``hierarchy-ID:controllers:path``; the unified (v2) line is ``0::path``.
    The first line naming a container decides, the v2 line first: on a hybrid host the v1
    controllers and the v2 tree name the same container.
    """
    lines = []
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and parts[2].startswith("/"):
            lines.append((parts[0] != "0" or parts[1] != "", parts[2]))
    lines.sort(key=lambda item: item[0])  # v2 (False) before v1 (True); stable otherwise
    first: ContainerRef | None = None
    for _v1, path in lines:
        ref = parse_path(path)
        if ref.container_id is not None:
            return ref
        if first is None or (ref.pod_uid and not first.pod_uid):
            first = ref
    if first is None:
        return ContainerRef()
    return ContainerRef(None, None, first.pod_uid, first.cgroup)
