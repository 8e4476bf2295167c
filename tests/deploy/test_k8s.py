"""deploy/k8s, checked offline the way kubeconform does: every manifest validates against the
Kubernetes JSON schemas in strict mode (no unknown field) for the oldest and the newest
Kubernetes version named below (the schemas come with the `kubernetes-validate` wheel). Then
what the schemas cannot say: the kustomization lists every manifest, references between objects
resolve, the service's pods meet the "restricted" Pod Security Standard their namespace
enforces, the agent gets exactly the host access docs/deploy.md explains, no Secret value is
in the tree, every `gpuprov` command line exists, and the CronJob's script scans each listed
image (run here with a stand-in `gpuprov`)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

import scanner
from tests.deploy.dockerfile import CHECKOUT, gpuprov_help

K8S = CHECKOUT / "deploy" / "k8s"
# the oldest Kubernetes these manifests are for (recursiveReadOnly mounts, CronJob timeZone) and
# the newest the schemas know
VERSIONS = ("1.30.0", kubernetes_validate.utils.latest_version() + ".0")
WORKLOADS = ("Deployment", "DaemonSet", "Job", "CronJob")
RESTRICTED_VOLUMES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
}


def _manifests() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted(K8S.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        for document in yaml.safe_load_all(path.read_text()):
            if document is not None:
                found.append((path.name, document))
    return found


def _objects(kind: str) -> list[dict[str, Any]]:
    return [d for _, d in _manifests() if d["kind"] == kind]


def _one(kind: str, name: str) -> dict[str, Any]:
    [found] = [d for d in _objects(kind) if d["metadata"]["name"] == name]
    return found


def _pod_template(workload: dict[str, Any]) -> dict[str, Any]:
    spec = workload["spec"]
    if workload["kind"] == "CronJob":
        spec = spec["jobTemplate"]["spec"]
    template: dict[str, Any] = spec["template"]
    return template


def _containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [*pod["spec"].get("initContainers", []), *pod["spec"]["containers"]]


@pytest.mark.parametrize("version", VERSIONS)
def test_every_manifest_is_valid_in_strict_mode(version: str) -> None:
    manifests = _manifests()
    assert len(manifests) >= 10
    for name, document in manifests:
        try:
            kubernetes_validate.validate(document, version, strict=True)
        except kubernetes_validate.ValidationError as error:
            pytest.fail(f"{name} {document['kind']}: {error.message} at {list(error.path)}")
    print(f"{len(manifests)} objects valid against the Kubernetes {version} schemas (strict)")


def test_strict_validation_rejects_an_unknown_field() -> None:
    deployment = _one("Deployment", "gpuprov-api")
    deployment["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}  # a typo
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, VERSIONS[-1], strict=True)


def test_the_kustomization_lists_every_manifest_and_pins_the_image() -> None:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    listed = kustomization["resources"]
    assert sorted(listed) == sorted(p.name for p in K8S.glob("*.yaml") if p.stem != "kustomization")
    assert kustomization["images"] == [{"name": "gpuprov", "newTag": scanner.__version__}]
    for _, document in _manifests():
        if document["kind"] in WORKLOADS:
            for container in _containers(_pod_template(document)):
                assert container["image"] == "gpuprov", document["metadata"]["name"]
        namespace = document["metadata"].get("namespace")
        assert (namespace is None) == (document["kind"] == "Namespace"), document


def test_references_resolve() -> None:
    configmaps = {
        (c["metadata"]["namespace"], c["metadata"]["name"]): c for c in _objects("ConfigMap")
    }
    for _, workload in _manifests():
        if workload["kind"] not in WORKLOADS:
            continue
        namespace = workload["metadata"]["namespace"]
        pod = _pod_template(workload)
        labels = pod["metadata"]["labels"]
        if "selector" in workload["spec"]:
            assert workload["spec"]["selector"]["matchLabels"].items() <= labels.items()
        used = [v["configMap"]["name"] for v in pod["spec"].get("volumes", []) if "configMap" in v]
        for container in _containers(pod):
            used += [e["configMapRef"]["name"] for e in container.get("envFrom", [])]
            for env in container.get("env", []):
                ref = env.get("valueFrom", {}).get("configMapKeyRef")
                if ref:
                    assert ref["key"] in configmaps[(namespace, ref["name"])]["data"]
            mounts = {m["name"] for m in container.get("volumeMounts", [])}
            assert mounts <= {v["name"] for v in pod["spec"].get("volumes", [])}
        for name in used:
            assert (namespace, name) in configmaps, (workload["metadata"]["name"], name)
    deployment = _one("Deployment", "gpuprov-api")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    service = _one("Service", "gpuprov-api")
    assert service["spec"]["selector"].items() <= labels.items()
    ports = {
        p["name"] for c in deployment["spec"]["template"]["spec"]["containers"] for p in c["ports"]
    }
    assert {p["targetPort"] for p in service["spec"]["ports"]} <= ports
    budget = _one("PodDisruptionBudget", "gpuprov-api")
    assert budget["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert 0 < budget["spec"]["minAvailable"] < deployment["spec"]["replicas"]
    server = _one("ConfigMap", "gpuprov-agent-config")["data"]["GPUPROV_SERVER"]
    assert (
        server
        == f"http://{service['metadata']['name']}.gpuprov.svc:{service['spec']['ports'][0]['port']}"
    )


def _secret_names() -> set[str]:
    names = set()
    for _, workload in _manifests():
        if workload["kind"] not in WORKLOADS:
            continue
        pod = _pod_template(workload)
        names |= {
            v["secret"]["secretName"] for v in pod["spec"].get("volumes", []) if "secret" in v
        }
        for container in _containers(pod):
            for env in container.get("env", []):
                ref = env.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    names.add(ref["name"])
    return names


def test_secrets_are_referenced_never_given() -> None:
    assert not _objects("Secret")
    text = "\n".join(p.read_text() for p in K8S.glob("*.yaml"))
    assert not re.search(r"(?i)password|BEGIN [A-Z ]*PRIVATE KEY|postgresql\+psycopg://", text)
    names = _secret_names()
    assert names == {
        "gpuprov-database",
        "gpuprov-secret-key",
        "gpuprov-agent-token",
        "gpuprov-registry-scan-token",
        "gpuprov-registry-auth",
    }
    guide = (CHECKOUT / "docs" / "deploy.md").read_text()
    for name in names:  # each is created by a command the guide gives
        assert f"create secret generic {name}" in guide or f"docker-registry {name}" in guide, name


def _restricted_problems(pod: dict[str, Any]) -> list[str]:
    """The Pod Security Standards' "restricted" profile (the rules a pod spec can break)."""
    spec = pod["spec"]
    problems = [k for k in ("hostPID", "hostIPC", "hostNetwork") if spec.get(k)]
    problems += [
        v["name"] for v in spec.get("volumes", []) if not set(v) - {"name"} <= RESTRICTED_VOLUMES
    ]
    pod_context = spec.get("securityContext", {})
    if pod_context.get("seccompProfile", {}).get("type") not in ("RuntimeDefault", "Localhost"):
        problems.append("seccompProfile")
    for container in _containers(pod):
        context = container.get("securityContext", {})
        name = container["name"]
        if context.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{name}: allowPrivilegeEscalation")
        if context.get("capabilities", {}).get("drop") != ["ALL"]:
            problems.append(f"{name}: drop ALL")
        if set(context.get("capabilities", {}).get("add", [])) - {"NET_BIND_SERVICE"}:
            problems.append(f"{name}: capabilities added")
        if context.get("runAsNonRoot", pod_context.get("runAsNonRoot")) is not True:
            problems.append(f"{name}: runAsNonRoot")
        if context.get("runAsUser", pod_context.get("runAsUser")) == 0:
            problems.append(f"{name}: runAsUser 0")
        if context.get("privileged"):
            problems.append(f"{name}: privileged")
        if context.get("readOnlyRootFilesystem") is not True:  # not in the standard: ours
            problems.append(f"{name}: readOnlyRootFilesystem")
    return problems


def test_the_service_pods_meet_the_restricted_pod_security_standard() -> None:
    [namespace] = [n for n in _objects("Namespace") if n["metadata"]["name"] == "gpuprov"]
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    checked = 0
    for _, workload in _manifests():
        if workload["kind"] in WORKLOADS and workload["metadata"]["namespace"] == "gpuprov":
            pod = _pod_template(workload)
            assert _restricted_problems(pod) == [], workload["metadata"]["name"]
            assert pod["spec"]["automountServiceAccountToken"] is False
            checked += 1
    assert checked == 4
    agent = _pod_template(_one("DaemonSet", "gpuprov-agent"))
    assert _restricted_problems(agent)  # the check is live: the agent's pod breaks it


def test_the_agent_reads_the_host_and_nothing_more() -> None:
    daemonset = _one("DaemonSet", "gpuprov-agent")
    pod = _pod_template(daemonset)["spec"]
    assert pod["hostPID"] is True and not pod.get("hostNetwork") and not pod.get("hostIPC")
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod[
        "tolerations"
    ]
    assert pod["automountServiceAccountToken"] is False
    [container] = pod["containers"]
    context = container["securityContext"]
    assert context["capabilities"] == {
        "drop": ["ALL"],
        "add": ["DAC_READ_SEARCH", "SYS_PTRACE", "CHECKPOINT_RESTORE"],
    }
    assert (
        context["readOnlyRootFilesystem"] is True and context["allowPrivilegeEscalation"] is False
    )
    assert context["privileged"] is False
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    host = mounts["/host"]
    assert volumes[host["name"]]["hostPath"]["path"] == "/"
    assert host["readOnly"] is True and host["recursiveReadOnly"] in ("Enabled", "IfPossible")
    # every other host path is the agent's own state, written by nothing else
    for name, volume in volumes.items():
        if "hostPath" in volume and name != host["name"]:
            assert "gpuprov" in volume["hostPath"]["path"], name
    args = container["args"]
    assert args[args.index("--root") + 1] == "/host" and args[args.index("--proc") + 1] == "/proc"
    assert args[args.index("--token-file") + 1].startswith(
        mounts["/etc/gpuprov/agent"]["mountPath"]
    )
    gpuprov_help(args)


def test_probes_and_commands() -> None:
    deployment = _one("Deployment", "gpuprov-api")
    assert deployment["spec"]["replicas"] >= 2
    [api] = deployment["spec"]["template"]["spec"]["containers"]
    assert api["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert (
        api["livenessProbe"]["httpGet"]["path"] == "/healthz"
    )  # a database outage restarts nothing
    assert api["args"][api["args"].index("--workers") + 1] == "2"
    gpuprov_help(api["args"])
    [wait] = deployment["spec"]["template"]["spec"]["initContainers"]
    assert "gpuprov db current" in wait["command"][-1]
    gpuprov_help(["db", "current"])
    sync = _one("CronJob", "gpuprov-advisories-sync")
    [container] = sync["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    assert container["args"][:2] == ["advisories", "sync"]
    assert container["args"][2].startswith("https://")
    gpuprov_help(container["args"])
    job = _one("Job", "gpuprov-migrate")
    [migrate] = job["spec"]["template"]["spec"]["containers"]
    assert migrate["args"] == ["db", "upgrade"]
    assert job["spec"]["template"]["spec"]["restartPolicy"] in ("OnFailure", "Never")


def test_the_registry_scan_script_scans_every_listed_image(tmp_path: Path) -> None:
    cronjob = _one("CronJob", "gpuprov-registry-scan")
    [container] = _pod_template(cronjob)["spec"]["containers"]
    assert container["command"] == ["sh", "-c"]
    script = container["args"][0]
    images = _one("ConfigMap", "gpuprov-registry-images")["data"]["images.txt"]
    assert not [
        line for line in images.splitlines() if line.strip() and not line.lstrip().startswith("#")
    ]
    listed = (
        "# fleet images\nreg.example/ml/train:1\n\n  reg.example/ml/serve@sha256:"
        + "a" * 64
        + "  # pinned\nreg.example/bad:1"
    )
    root = tmp_path / "etc" / "gpuprov" / "images"
    root.mkdir(parents=True)
    (root / "images.txt").write_text(listed)  # no newline at the end: the last line counts too
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    (bin_dir / "gpuprov").write_text(
        f'#!/bin/sh\nprintf "%s\\n" "$*" >> {calls}\ncase "$2" in *bad*) exit 2;; esac\n'
    )
    (bin_dir / "gpuprov").chmod(0o755)
    done = subprocess.run(
        ["sh", "-c", script.replace("/etc/gpuprov/images", str(root))],
        env={**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    lines = calls.read_text().splitlines()
    assert [line.split()[1] for line in lines] == [
        "registry:reg.example/ml/train:1",
        "registry:reg.example/ml/serve@sha256:" + "a" * 64,
        "registry:reg.example/bad:1",
    ]
    assert done.returncode == 1 and "failed: reg.example/bad:1" in done.stderr
    gpuprov_help(lines[0].split())
