"""`gpuprov advisories sync URL` against a mirror served over HTTPS on loopback (a private CA):
one year of the shared bulletins fetched and imported with their URLs as sources, a bulletin
the mirror lacks refused, names from the index never leaving the mirror, HTTP refused."""

from __future__ import annotations

import json
import shutil
import ssl
import threading
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from app.storage.tables import AdvisoryDocument
from gpuprov.cli import app as gpuprov_app
from tests.app.conftest import Service
from tests.fixtures.registry import TlsFiles
from tests.scanner.advisories.documents import PSIRT

pytestmark = pytest.mark.skipif(not PSIRT.is_dir(), reason="../shared/fixtures absent")


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def mirror(tmp_path: Path) -> Iterator[tuple[str, Path, Path]]:
    """(base URL, served directory, CA file): 2022 of the shared bulletins, plus an index
    line naming a bulletin the mirror does not hold and one naming a path outside it."""
    root = tmp_path / "mirror"
    shutil.copytree(PSIRT / "2022", root / "2022")
    with (root / "2022/CVE_index.csv").open("a") as f:
        f.write("CVE-2022-99999;5.0;MEDIUM;v;CWE-1;9999;Gone;x;y\n")
        f.write("CVE-2022-99998;5.0;MEDIUM;v;CWE-1;../../secret;Evil;x;y\n")
    tls = TlsFiles.create(tmp_path / "tls")
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=str(root)))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(tls.cert), str(tls.key))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}", root, tls.ca
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def run(service: Service, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(gpuprov_app, list(args), env={"GPUPROV_DATABASE_URL": service.url})
    return result.exit_code, result.stdout, result.stderr


def test_sync_imports_a_year_with_urls_as_sources(
    service: Service, mirror: tuple[str, Path, Path]
) -> None:
    url, root, ca = mirror
    args = ("advisories", "sync", url, "--year", "2022", "--year", "2019", "--ca-file", str(ca))
    code, out, err = run(service, *args, "--format", "json")
    summary = json.loads(out)
    bulletins = sorted(p.name for p in (root / "2022").iterdir() if p.is_dir())
    assert summary["imported"] == len(bulletins), err
    # the bulletin the index names and the mirror lacks: refused by URL; the path that would
    # leave the mirror is never requested
    assert summary["refused"] == [
        {"path": f"{url}/2022/9999/9999.json", "error": "not fetched: HTTP 404"},
        {"path": f"{url}/2022/9999/CVE-2022-99999.json", "error": "not fetched: HTTP 404"},
    ]
    assert code == 1
    with service.db.session() as session:
        sources = set(session.scalars(select(AdvisoryDocument.source)))
    assert sources == {f"{url}/2022/{b}/{b}.json" for b in bulletins}
    again = json.loads(run(service, *args, "--format", "json")[1])
    assert (again["imported"], again["unchanged"]) == (0, len(bulletins))


def test_sync_refuses_http_and_an_untrusted_server(
    service: Service, mirror: tuple[str, Path, Path]
) -> None:
    url, _, _ = mirror
    code, _, err = run(service, "advisories", "sync", url.replace("https", "http"))
    assert code == 2 and "is not an https:// URL" in err
    code, out, _ = run(service, "advisories", "sync", url, "--year", "2022", "--format", "json")
    summary = json.loads(out)
    assert code == 1 and summary["imported"] == 0
    assert "CERTIFICATE_VERIFY_FAILED" in summary["refused"][0]["error"]
