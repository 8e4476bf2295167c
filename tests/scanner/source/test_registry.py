"""The registry client and source against a real docker-registry on loopback (anonymous,
htpasswd basic auth, bearer tokens, TLS with a private CA), plus transport-level cases
(redirects, plain-HTTP refusal, referrers API) through httpx's mock transport."""

from __future__ import annotations

import base64
import json
import logging
import ssl
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from scanner.errors import SourceError, UsageError
from scanner.imageref import ImageReference, is_registry_target, split_name
from scanner.source import open_source
from scanner.source.layercache import LayerCache
from scanner.source.registry import RegistryOptions, RegistrySource
from scanner.source.registry.auth import (
    Credentials,
    docker_config_path,
    load_docker_credentials,
    parse_challenges,
)
from scanner.source.registry.client import RegistryClient
from scanner.source.registry.manifest import DOCKER_MANIFEST, OCI_EMPTY, OCI_INDEX, OCI_MANIFEST
from scanner.source.registry.referrers import FoundBy, list_referrers
from tests.fixtures.images import (
    Built,
    Image,
    Layer,
    file,
    hashing_selector,
    sha256,
    write_oci_layout,
    write_oci_layout_tags,
)
from tests.fixtures.registry import PushClient, Registry, free_port, push_built, registry_fixture
from tests.scanner.source.samples import CUDNN, rich_image

plain_registry = registry_fixture("plain_registry")
basic_registry = registry_fixture("basic_registry", basic=("alice", "wonder land"))
token_registry = registry_fixture("token_registry", token_users={"bob": "b0b-secret"})
tls_registry = registry_fixture("tls_registry", tls=True)

NO_CONFIG = RegistryOptions(use_docker_config=False)
SIMPLESIGNING = "application/vnd.dev.cosign.simplesigning.v1+json"
BUNDLE = "application/vnd.dev.sigstore.bundle.v0.3+json"


def small_image(tag: str, arch: str = "amd64") -> Image:
    return Image(
        [Layer([file(f"usr/lib/libcudnn.so.9.{tag}", f"{tag}-{arch}".encode() * 100)])],
        architecture=arch,
        labels={"tag": tag},
    )


def client_for(registry: Registry, **kwargs: object) -> PushClient:
    return PushClient(registry.host, **kwargs)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def pushed(plain_registry: Registry, tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """Images pushed: ``rich`` (OCI, by our client); with skopeo, ``docker`` (Docker v2
    schema 2) and ``multi`` (an index: linux/amd64 + linux/arm64/v8)."""
    layout = tmp_path_factory.mktemp("layouts") / "layout"
    multi = [
        small_image("multi"),
        Image(small_image("multi", "arm64").layers, architecture="arm64", variant="v8"),
    ]
    built = write_oci_layout_tags(
        layout, {"rich": rich_image(), "docker": small_image("docker"), "multi": multi}
    )
    # skopeo would compress the plain-tar layer on the way: push the exact bytes ourselves.
    with client_for(plain_registry) as client:
        push_built(client, "demo/rich", built["rich"], "v1")
    plain_registry.push_layout(layout, "docker", "demo/docker", docker_format=True)
    plain_registry.push_layout(layout, "multi", "demo/multi", all_platforms=True)
    index = json.loads((layout / "index.json").read_bytes())
    tops = {
        d["annotations"]["org.opencontainers.image.ref.name"]: d["digest"]
        for d in index["manifests"]
    }
    return {"layout": layout, "built": built, "tops": tops}


# --- references --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("registry:127.0.0.1:5000/demo/app:v1", ("127.0.0.1:5000", "demo/app", "v1", None)),
        ("registry:reg.example.com/app", ("reg.example.com", "app", "latest", None)),
        (
            "registry:localhost/a/b/c@sha256:" + "a" * 64,
            ("localhost", "a/b/c", None, "sha256:" + "a" * 64),
        ),
        (
            "registry:[::1]:5000/x:1@sha256:" + "b" * 64,
            ("[::1]:5000", "x", "1", "sha256:" + "b" * 64),
        ),
        ("docker://ubuntu", ("docker.io", "library/ubuntu", "latest", None)),
        ("docker://nvidia/cuda:12.4.1-base", ("docker.io", "nvidia/cuda", "12.4.1-base", None)),
        ("docker://localhost:5000/cuda", ("localhost:5000", "cuda", "latest", None)),
        (
            "docker://nvcr.io/nvidia/pytorch:24.01-py3",
            ("nvcr.io", "nvidia/pytorch", "24.01-py3", None),
        ),
    ],
)
def test_reference_parsing(text: str, expected: tuple[str, str, str | None, str | None]) -> None:
    ref = ImageReference.parse(text)
    assert (ref.registry, ref.repository, ref.tag, ref.digest) == expected
    assert ImageReference.parse("registry:" + str(ref)) == ref


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("registry:host.example", r"expected HOST\[:PORT\]/REPOSITORY"),
        ("registry:host.example/Upper", "not a valid repository"),
        ("registry:host.example/app:bad/tag", "not a valid repository"),
        ("registry:host.example/app@sha256:xyz", "invalid or unsupported digest"),
        ("registry:bad_host!/app", "not a valid registry host"),
        ("oci:dir", "not a registry reference"),
    ],
)
def test_reference_errors(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        ImageReference.parse(text)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("nvcr.io/nvidia/cuda:12.4", ("nvcr.io/nvidia/cuda", "12.4", None)),
        ("localhost:5000/ml/train", ("localhost:5000/ml/train", None, None)),
        (
            "localhost:5000/ml/train:1@sha256:" + "c" * 64,
            ("localhost:5000/ml/train", "1", "sha256:" + "c" * 64),
        ),
        ("train@sha256:" + "c" * 64, ("train", None, "sha256:" + "c" * 64)),
        ("[::1]:5000/x", ("[::1]:5000/x", None, None)),
        ("layout:", ("layout", "", None)),
    ],
)
def test_split_name(name: str, expected: tuple[str, str | None, str | None]) -> None:
    """The one split of image names: references, reported asset names, purls."""
    assert split_name(name) == expected


def test_registry_targets() -> None:
    assert is_registry_target("registry:host/app") and is_registry_target("docker://ubuntu")
    assert not is_registry_target("oci:registry:app") and not is_registry_target("/registry:")


def test_challenge_parsing() -> None:
    header = (
        'Bearer realm="https://auth.example/token",service="registry.example",'
        'scope="repository:a/b:pull,push", Basic realm="x \\"y\\""'
    )
    assert parse_challenges(header) == [
        (
            "bearer",
            {
                "realm": "https://auth.example/token",
                "service": "registry.example",
                "scope": "repository:a/b:pull,push",
            },
        ),
        ("basic", {"realm": 'x "y"'}),
    ]


# --- pulling from the real registry ------------------------------------------------------------


def test_pull_manifest_config_and_blobs(
    plain_registry: Registry, pushed: dict[str, object]
) -> None:
    built = pushed["built"]["rich"]  # type: ignore[index]
    assert isinstance(built, Built)
    ref = ImageReference.parse(plain_registry.ref("demo/rich", "v1"))
    with client_for(plain_registry) as client:
        image = client.resolve(ref)
        assert image.digest == image.top_digest == built.manifest_digest
        assert image.manifest.media_type == OCI_MANIFEST
        assert image.config_raw == built.config
        assert image.config["architecture"] == "amd64"
        assert [d.digest for d in image.layers] == built.layer_digests
        for desc, blob in zip(image.layers, built.layer_blobs, strict=True):
            with image.open_blob(desc.digest) as stream:
                assert stream.read() == blob
        assert client.read_blob("demo/rich", built.config_digest) == built.config


def test_tag_and_digest_references(plain_registry: Registry, pushed: dict[str, object]) -> None:
    built = pushed["built"]["rich"]  # type: ignore[index]
    assert isinstance(built, Built)
    host = plain_registry.host
    with client_for(plain_registry) as client:
        by_digest = client.resolve(
            ImageReference.parse(f"registry:{host}/demo/rich@{built.manifest_digest}")
        )
        both = client.resolve(
            ImageReference.parse(f"registry:{host}/demo/rich:v1@{built.manifest_digest}")
        )
        assert by_digest.digest == both.digest == built.manifest_digest
        with pytest.raises(SourceError, match=rf"image not found: {host}/demo/rich:nope"):
            client.resolve(ImageReference.parse(f"registry:{host}/demo/rich:nope"))
        with pytest.raises(SourceError, match="image not found: .*/demo/absent:v1"):
            client.resolve(ImageReference.parse(f"registry:{host}/demo/absent:v1"))
        missing = "sha256:" + "0" * 64
        with pytest.raises(SourceError, match=f"image not found: .*@{missing}"):
            client.resolve(ImageReference.parse(f"registry:{host}/demo/rich@{missing}"))


def test_docker_schema2_manifest(plain_registry: Registry, pushed: dict[str, object]) -> None:
    ref = ImageReference.parse(plain_registry.ref("demo/docker", "docker"))
    with client_for(plain_registry) as client:
        image = client.resolve(ref)
    assert image.manifest.media_type == DOCKER_MANIFEST
    assert image.config_descriptor.media_type == "application/vnd.docker.container.image.v1+json"
    assert image.config["config"]["Labels"] == {"tag": "docker"}


def test_index_with_two_platforms(plain_registry: Registry, pushed: dict[str, object]) -> None:
    amd64, arm64 = pushed["built"]["multi"]  # type: ignore[index]
    top = pushed["tops"]["multi"]  # type: ignore[index]
    ref = ImageReference.parse(plain_registry.ref("demo/multi", "multi"))
    with client_for(plain_registry) as client:
        default = client.resolve(ref)
        assert (default.digest, default.top_digest, default.platform) == (
            amd64.manifest_digest,
            top,
            "linux/amd64",
        )
        arm = client.resolve(ref, "linux/arm64")
        assert (arm.digest, arm.platform) == (arm64.manifest_digest, "linux/arm64/v8")
        assert client.resolve(ref, "linux/arm64/v8").digest == arm64.manifest_digest
        with pytest.raises(
            UsageError,
            match=r"no image for platform linux/s390x \(available: linux/amd64, linux/arm64/v8\)",
        ):
            client.resolve(ref, "linux/s390x")
        with pytest.raises(UsageError, match="not OS/ARCH"):
            client.resolve(ref, "linux")
        # A single-platform image is checked against its config.
        single = ImageReference.parse(plain_registry.ref("demo/rich", "v1"))
        with pytest.raises(UsageError, match="is for linux/amd64, not linux/arm64"):
            client.resolve(single, "linux/arm64")


def test_source_view_equals_layout_view(
    plain_registry: Registry, pushed: dict[str, object], tmp_path: Path
) -> None:
    """The registry source feeds the same layer pipeline as an OCI layout: same view."""
    layout = pushed["layout"]
    target = plain_registry.ref("demo/rich", "v1")
    selector = hashing_selector()
    remote = open_source(target, cache_dir=None, use_cache=False, all_filesystems=False).open_view(
        selector
    )
    local = open_source(
        f"oci:{layout}:rich", cache_dir=None, use_cache=False, all_filesystems=False
    ).open_view(selector)
    assert remote.nodes == local.nodes
    assert remote.metadata == local.metadata
    assert remote.candidates == local.candidates
    assert remote.skipped == local.skipped
    for attr in ("digest", "config_digest", "platform", "env", "labels", "layers"):
        assert getattr(remote.info, attr) == getattr(local.info, attr)
    assert remote.info.reference == target
    assert remote.info.name == f"{plain_registry.host}/demo/rich:v1"
    cudnn = [c for c in remote.candidates if c.ref.path.endswith("libcudnn.so.9.1.0")]
    assert cudnn and cudnn[0].size == len(CUDNN)


class CountingTransport(httpx.BaseTransport):
    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.paths: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.path)
        return self.inner.handle_request(request)


def test_layer_cache_spares_blob_downloads(
    plain_registry: Registry, pushed: dict[str, object], tmp_path: Path
) -> None:
    cache = LayerCache(tmp_path / "cache")
    target = plain_registry.ref("demo/rich", "v1")
    first, second = CountingTransport(), CountingTransport()
    view1 = RegistrySource(target, cache=cache, options=NO_CONFIG, transport=first).open_view(
        hashing_selector()
    )
    view2 = RegistrySource(target, cache=cache, options=NO_CONFIG, transport=second).open_view(
        hashing_selector()
    )
    assert view1.nodes == view2.nodes and view1.candidates == view2.candidates
    assert view1.stats["layers_read"] == 3 and view2.stats["layers_cached"] == 3
    blobs = [p for p in second.paths if "/blobs/" in p]
    assert len(blobs) == 1  # the config only
    # the config, three layers, and once more the layer holding /etc/passwd: a library-named
    # symlink points there (the second scan takes that targeted read from the cache too)
    assert len([p for p in first.paths if "/blobs/" in p]) == 5


def test_tampered_blob_is_named(plain_registry: Registry, tmp_path: Path) -> None:
    built = write_oci_layout(
        tmp_path / "layout", small_image("tamper" + tmp_path.name[-6:].replace("_", "")), "t"
    )
    plain_registry.push_layout(tmp_path / "layout", "t", "demo/tamper", dest_tag="t")
    layer = built.layer_digests[0]
    data = plain_registry.blob_file(layer)
    blob = bytearray(data.read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    data.write_bytes(bytes(blob))
    ref = ImageReference.parse(plain_registry.ref("demo/tamper", "t"))
    with client_for(plain_registry) as client:
        image = client.resolve(ref)
        with (
            image.open_blob(layer) as stream,
            pytest.raises(
                SourceError,
                match=rf"blob {layer} of {plain_registry.host}/demo/tamper does not match its "
                r"digest: the content hashes to sha256:[0-9a-f]{64}",
            ),
        ):
            stream.read()
    with pytest.raises(SourceError, match=rf"layer {layer}: digest mismatch"):
        RegistrySource(ref, options=NO_CONFIG).open_view(hashing_selector())


# --- authentication ----------------------------------------------------------------------------


def test_basic_auth(basic_registry: Registry, tmp_path: Path) -> None:
    write_oci_layout(tmp_path / "layout", small_image("basic"), "b")
    basic_registry.push_layout(tmp_path / "layout", "b", "team/app")
    ref = ImageReference.parse(basic_registry.ref("team/app", "b"))
    good = Credentials("alice", "wonder land")
    with client_for(basic_registry, credentials=good) as client:
        assert client.resolve(ref).config["config"]["Labels"] == {"tag": "basic"}
    with (
        client_for(basic_registry) as client,
        pytest.raises(
            SourceError,
            match=rf"authentication failed for {basic_registry.host}/team/app:b: "
            "the registry requires credentials",
        ),
    ):
        client.resolve(ref)
    with (
        client_for(basic_registry, credentials=Credentials("alice", "wrong")) as client,
        pytest.raises(
            SourceError, match=rf"^authentication failed for {basic_registry.host}/team/app:b$"
        ),
    ):
        client.resolve(ref)


@pytest.mark.parametrize("answer", ["token", "access_token"])
def test_bearer_token_flow(token_registry: Registry, tmp_path: Path, answer: str) -> None:
    tokens = token_registry.tokens
    assert tokens is not None
    tokens.answer = answer
    built = small_image("bearer-" + answer).build()
    repo = f"secure/{answer.replace('_', '-')}"
    with client_for(token_registry, credentials=Credentials("bob", "b0b-secret")) as client:
        digest = push_built(client, repo, built, "v1")
        assert digest == built.manifest_digest
    # the registry's challenge names the actions in either order
    scopes = [
        tuple(s.split(":")[:2]) + (set(s.split(":")[2].split(",")),)
        for r in tokens.requests
        for s in r["query"].get("scope", [])
    ]
    assert ("repository", repo, {"pull", "push"}) in scopes
    assert all(r["query"].get("service") for r in tokens.requests)
    ref = ImageReference.parse(token_registry.ref(repo, "v1"))
    with client_for(token_registry) as anonymous:  # the token service lets anyone pull
        assert anonymous.resolve(ref).digest == built.manifest_digest
        with pytest.raises(
            SourceError,
            match=f"authentication failed for upload of blob .* to {token_registry.host}/{repo}",
        ):
            anonymous.push_blob(repo, b"anonymous push")
    with (
        client_for(token_registry, credentials=Credentials("bob", "nope")) as client,
        pytest.raises(
            SourceError,
            match=f"authentication failed for {token_registry.host}/{repo}:v1: "
            "the token service 127.0.0.1 rejected the credentials",
        ),
    ):
        client.resolve(ref)


def test_docker_config_credentials(basic_registry: Registry, tmp_path: Path) -> None:
    write_oci_layout(tmp_path / "layout", small_image("cfg"), "c")
    basic_registry.push_layout(tmp_path / "layout", "c", "team/cfg")
    target = basic_registry.ref("team/cfg", "c")
    config_dir = tmp_path / "docker"
    config_dir.mkdir()
    auth = base64.b64encode(b"alice:wonder land").decode()
    (config_dir / "config.json").write_text(
        json.dumps(
            {
                "auths": {
                    "other.example": {"auth": "eDp5"},
                    f"http://{basic_registry.host}/v1/": {"auth": auth},
                }
            }
        )
    )
    env = {"DOCKER_CONFIG": str(config_dir), "HOME": str(tmp_path / "home")}
    assert docker_config_path(env) == config_dir / "config.json"
    assert docker_config_path({"HOME": str(tmp_path)}) == tmp_path / ".docker/config.json"
    options = RegistryOptions(docker_config=docker_config_path(env))
    view = RegistrySource(target, options=options).open_view(hashing_selector())
    assert view.info.label_dict() == {"tag": "cfg"}
    # explicit credentials win over the file
    bad = RegistryOptions(username="alice", password="bad", docker_config=docker_config_path(env))
    with pytest.raises(SourceError, match="authentication failed"):
        RegistrySource(target, options=bad).open_view(hashing_selector())


def test_docker_config_forms(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(
        json.dumps(
            {
                "auths": {
                    "https://index.docker.io/v1/": {
                        "auth": base64.b64encode(b"hub:pw:with:colons").decode()
                    },
                    "reg.example:5000": {"username": "u", "password": "p"},
                    "broken.example": {"auth": "!!notbase64"},
                }
            }
        )
    )
    assert load_docker_credentials("docker.io", path) == Credentials("hub", "pw:with:colons")
    assert load_docker_credentials("reg.example:5000", path) == Credentials("u", "p")
    assert load_docker_credentials("reg.example", path) is None
    assert load_docker_credentials("x.example", tmp_path / "absent.json") is None
    with pytest.raises(SourceError, match="auth entry for broken.example is not base64"):
        load_docker_credentials("broken.example", path)
    path.write_text("{not json")
    with pytest.raises(SourceError, match="docker config is not valid JSON"):
        load_docker_credentials("docker.io", path)
    assert "p" not in repr(Credentials("u", "p")).replace("'u'", "")
    with pytest.raises(UsageError, match="both a user name and a password"):
        RegistryOptions(username="u").credentials("x.example")


# --- transport: reachability, TLS, plain HTTP --------------------------------------------------


def test_unreachable_registry() -> None:
    port = free_port()
    with pytest.raises(
        SourceError, match=rf"^cannot reach registry 127.0.0.1:{port}: connection refused$"
    ):
        RegistrySource(f"registry:127.0.0.1:{port}/a/b:1", options=NO_CONFIG).open_view(
            hashing_selector()
        )


def test_tls_with_private_ca(
    tls_registry: Registry, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    assert tls_registry.ca is not None
    built = small_image("tls").build()
    with client_for(tls_registry, ca_file=str(tls_registry.ca)) as client:
        push_built(client, "tls/app", built, "v1")
        ref = ImageReference.parse(tls_registry.ref("tls/app", "v1"))
        assert client.resolve(ref).digest == built.manifest_digest
    # Loopback does not relax certificate checks: no fallback to plain HTTP either.
    with (
        client_for(tls_registry) as client,
        pytest.raises(
            SourceError,
            match=rf"TLS verification failed for registry {tls_registry.host}: .*CA certificate",
        ),
    ):
        client.resolve(ref)
    with caplog.at_level(logging.WARNING), client_for(tls_registry, insecure=True) as client:
        assert client.resolve(ref).digest == built.manifest_digest
    assert "UNSAFE" in caplog.text
    with pytest.raises(SourceError, match="cannot load CA certificates"):
        client_for(tls_registry, ca_file=str(tmp_path / "missing.pem"))


def _failing(request: httpx.Request) -> httpx.Response:
    raise AssertionError(f"unexpected request {request.url}")


def test_plain_http_refused_for_remote_hosts() -> None:
    with pytest.raises(SourceError, match="refusing plain HTTP to registry registry.example.com"):
        RegistryClient(
            "registry.example.com", plain_http=True, transport=httpx.MockTransport(_failing)
        )
    source = RegistrySource(
        "registry:registry.example.com/app:1",
        options=RegistryOptions(plain_http=True, use_docker_config=False),
        transport=httpx.MockTransport(_failing),
    )
    with pytest.raises(SourceError, match="refusing plain HTTP"):
        source.open_view(hashing_selector())
    for host in ("localhost:5000", "127.0.0.2", "[::1]:5000"):
        RegistryClient(host, plain_http=True, transport=httpx.MockTransport(_failing)).close()


def _tls_broken(seen: list[str]) -> Callable[[httpx.Request], httpx.Response]:
    """A server that does not speak TLS: HTTPS handshakes fail, plain HTTP answers."""

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        if request.url.scheme == "https":
            try:
                raise ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number")
            except ssl.SSLError as e:
                raise httpx.ConnectError(str(e), request=request) from e
        return httpx.Response(200, json={})

    return handler


def test_no_plain_http_fallback_without_insecure(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[str] = []
    with RegistryClient(
        "registry.example.com", transport=httpx.MockTransport(_tls_broken(seen))
    ) as client:
        with pytest.raises(
            SourceError, match="TLS handshake with registry registry.example.com failed"
        ):
            client.ping()
    assert seen == ["https://registry.example.com/v2/"]
    seen.clear()
    with caplog.at_level(logging.WARNING):
        client = RegistryClient(
            "registry.example.com", insecure=True, transport=httpx.MockTransport(_tls_broken(seen))
        )
    with client:
        client.ping()
    assert seen == ["https://registry.example.com/v2/", "http://registry.example.com/v2/"]
    assert "UNSAFE" in caplog.text


# --- redirects and referrers API (mock registry) -----------------------------------------------


def test_blob_redirect_to_storage_drops_credentials() -> None:
    blob = b"layer bytes" * 1000
    digest = sha256(blob)
    storage_auth: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.host == "storage.example":
            storage_auth.append(request.headers.get("authorization"))
            return httpx.Response(200, content=blob)
        if request.headers.get("authorization") != "Basic " + base64.b64encode(b"u:p").decode():
            return httpx.Response(401, headers={"WWW-Authenticate": 'Basic realm="r"'})
        if request.url.path == f"/v2/app/blobs/{digest}":
            return httpx.Response(307, headers={"Location": "https://storage.example/b?sig=1"})
        if request.url.path == "/v2/app/blobs/" + sha256(b"x"):
            return httpx.Response(302, headers={"Location": "http://storage.example/b"})
        return httpx.Response(200, json={})

    with RegistryClient(
        "registry.example",
        credentials=Credentials("u", "p"),
        transport=httpx.MockTransport(handler),
    ) as client:
        assert client.read_blob("app", digest) == blob
        assert storage_auth == [None]
        with pytest.raises(SourceError, match="refusing redirect to http://storage.example"):
            client.read_blob("app", sha256(b"x"))


def test_referrers_api_and_subject_check() -> None:
    image = sha256(b"image")
    good = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "artifactType": BUNDLE,
            "subject": {"digest": image, "size": 5, "mediaType": OCI_MANIFEST},
            "config": {"mediaType": OCI_EMPTY, "digest": sha256(b"{}"), "size": 2},
            "layers": [],
        }
    ).encode()
    other = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "artifactType": BUNDLE,
            "subject": {"digest": sha256(b"other"), "size": 5},
            "config": {"mediaType": OCI_EMPTY, "digest": sha256(b"{}"), "size": 2},
            "layers": [],
        }
    ).encode()
    manifests = {sha256(good): good, sha256(other): other}
    queries: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == f"/v2/app/referrers/{image}":
            queries.append(str(request.url.params.get("artifactType")))
            index = {
                "schemaVersion": 2,
                "mediaType": OCI_INDEX,
                "manifests": [
                    {"mediaType": OCI_MANIFEST, "digest": d, "size": len(m), "artifactType": BUNDLE}
                    for d, m in manifests.items()
                ],
            }
            return httpx.Response(200, json=index)
        for digest, body in manifests.items():
            if path == f"/v2/app/manifests/{digest}":
                return httpx.Response(200, content=body, headers={"Content-Type": OCI_MANIFEST})
        if "/manifests/" in path:
            return httpx.Response(404, json={"errors": [{"code": "MANIFEST_UNKNOWN"}]})
        return httpx.Response(200, json={})

    with RegistryClient("registry.example", transport=httpx.MockTransport(handler)) as client:
        found = list_referrers(client, "app", image, artifact_type=BUNDLE)
        assert [(r.digest, r.found_by, r.artifact_type) for r in found] == [
            (sha256(good), FoundBy.REFERRERS_API, BUNDLE)
        ]
        assert queries == [BUNDLE]
        assert list_referrers(client, "app", image, artifact_type="application/other") == []


# --- signatures in the real registry: the tag fallbacks ---------------------------------------


def _push_cosign_signature(client: PushClient, repo: str, image_digest: str) -> tuple[bytes, str]:
    payload = json.dumps(
        {
            "critical": {
                "identity": {"docker-reference": repo},
                "image": {"docker-manifest-digest": image_digest},
                "type": "cosign container image signature",
            },
            "optional": None,
        }
    ).encode()
    layer = client.push_blob(repo, payload, SIMPLESIGNING)
    config = json.dumps(
        {
            "architecture": "",
            "os": "",
            "config": {},
            "rootfs": {"type": "layers", "diff_ids": [layer.digest]},
        }
    ).encode()
    config_desc = client.push_blob(repo, config, "application/vnd.oci.image.config.v1+json")
    signature = base64.b64encode(b"not-a-real-signature").decode()
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": config_desc.to_json(),
        "layers": [
            {**layer.to_json(), "annotations": {"dev.cosignproject.cosign/signature": signature}}
        ],
    }
    tag = "sha256-" + image_digest.split(":")[1] + ".sig"
    client.push_manifest(repo, json.dumps(manifest).encode(), OCI_MANIFEST, tag)
    return payload, signature


def test_referrers_fall_back_to_tags(plain_registry: Registry, pushed: dict[str, object]) -> None:
    """docker-registry 2.8 has no referrers API (404): the sha256-<hex> referrers index and
    cosign's sha256-<hex>.sig tag are found instead."""
    top = pushed["tops"]["multi"]  # type: ignore[index]
    repo = "demo/multi"
    with client_for(plain_registry) as client:
        assert list_referrers(client, repo, top) == []
        payload, signature = _push_cosign_signature(client, repo, top)
        # cosign v3 on a registry without the API: an artifact with a subject + the tag index
        bundle = client.push_blob(
            repo, b'{"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json"}', BUNDLE
        )
        empty = client.push_blob(repo, b"{}", OCI_EMPTY)
        subject = {"mediaType": OCI_INDEX, "digest": top, "size": 0}
        artifact = json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": OCI_MANIFEST,
                "artifactType": BUNDLE,
                "config": empty.to_json(),
                "layers": [bundle.to_json()],
                "subject": subject,
            }
        ).encode()
        artifact_digest = client.push_manifest(repo, artifact, OCI_MANIFEST)
        index = json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": OCI_INDEX,
                "manifests": [
                    {
                        "mediaType": OCI_MANIFEST,
                        "digest": artifact_digest,
                        "size": len(artifact),
                        "artifactType": BUNDLE,
                    }
                ],
            }
        ).encode()
        client.push_manifest(repo, index, OCI_INDEX, "sha256-" + top.split(":")[1])

        found = {r.found_by: r for r in list_referrers(client, repo, top)}
        assert set(found) == {FoundBy.REFERRERS_TAG, FoundBy.COSIGN_SIGNATURE}
        sig = found[FoundBy.COSIGN_SIGNATURE]
        assert sig.tag == "sha256-" + top.split(":")[1] + ".sig"
        (layer,) = sig.layers
        assert layer.media_type == SIMPLESIGNING
        assert layer.annotations["dev.cosignproject.cosign/signature"] == signature
        assert client.read_blob(repo, layer.digest) == payload
        assert found[FoundBy.REFERRERS_TAG].digest == artifact_digest
        assert found[FoundBy.REFERRERS_TAG].manifest.subject == top
        only_bundles = list_referrers(client, repo, top, artifact_type=BUNDLE)
        assert [r.found_by for r in only_bundles] == [FoundBy.REFERRERS_TAG]
        only_sigs = list_referrers(client, repo, top, artifact_type=SIMPLESIGNING)
        assert [r.found_by for r in only_sigs] == [FoundBy.COSIGN_SIGNATURE]
        image = client.resolve(ImageReference.parse(plain_registry.ref(repo, "multi")))
        assert {r.found_by for r in list_referrers(client, repo, image.top_digest)} == set(found)


def _mock_registry(routes: dict[str, httpx.Response]) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v2/" and "/v2/" not in routes:
            return httpx.Response(200, json={})
        return routes.get(request.url.path) or httpx.Response(404, json={"errors": []})

    return httpx.MockTransport(handler)


def test_error_answers_are_clear() -> None:
    ref = ImageReference.parse("registry:registry.example/app:1")
    schema1 = b'{"schemaVersion": 1, "name": "app", "fsLayers": []}'
    config = b'{"mediaType": "application/vnd.example.thing"}'
    artifact = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {
                "mediaType": "application/vnd.example.thing",
                "digest": sha256(config),
                "size": len(config),
            },
            "layers": [],
        }
    ).encode()
    cases: list[tuple[dict[str, httpx.Response], str]] = [
        ({"/v2/": httpx.Response(404)}, "does not implement the OCI distribution API"),
        (
            {
                "/v2/app/manifests/1": httpx.Response(
                    403, json={"errors": [{"code": "DENIED", "message": "no\x1bpe"}]}
                )
            },
            r"^access denied to registry.example/app:1: no\?pe$",
        ),
        (
            {"/v2/app/manifests/1": httpx.Response(500, text="oops")},
            "answered HTTP 500 for registry.example/app:1",
        ),
        ({"/v2/app/manifests/1": httpx.Response(429)}, "rate limiting"),
        (
            {
                "/v2/app/manifests/1": httpx.Response(
                    200,
                    content=schema1,
                    headers={
                        "Content-Type": "application/vnd.docker.distribution.manifest.v1+prettyjws"
                    },
                )
            },
            "unsupported manifest type 'application/vnd.docker.distribution.manifest.v1",
        ),
        (
            {
                "/v2/app/manifests/1": httpx.Response(
                    200, content=artifact, headers={"Content-Type": OCI_MANIFEST}
                )
            },
            "is an artifact of type 'application/vnd.example.thing', not a container image",
        ),
        (
            {
                "/v2/app/manifests/1": httpx.Response(
                    200, content=b"[1]", headers={"Docker-Content-Digest": sha256(b"other")}
                )
            },
            "the registry says sha256:.* but the content hashes to",
        ),
    ]
    for routes, message in cases:
        with RegistryClient("registry.example", transport=_mock_registry(routes)) as client:
            with pytest.raises(SourceError, match=message):
                client.resolve(ref)
    blob = b"0123456789"
    routes = {f"/v2/app/blobs/{sha256(blob)}": httpx.Response(200, content=blob)}
    with RegistryClient("registry.example", transport=_mock_registry(routes)) as client:
        with client.open_blob("app", sha256(blob), size=4) as stream:
            with pytest.raises(SourceError, match=r"is larger than its declared size 4"):
                stream.read()
        with client.open_blob("app", sha256(blob), size=12) as stream:
            with pytest.raises(SourceError, match=r"has 10 bytes but its descriptor says 12"):
                stream.read()
        with pytest.raises(
            SourceError, match=r"blob sha256:[0-9a-f]+ not found in registry.example/app"
        ):
            client.read_blob("app", sha256(b"absent"))
        with pytest.raises(SourceError, match=r"larger than 5 bytes"):
            client.read_blob("app", sha256(blob), max_bytes=5)
