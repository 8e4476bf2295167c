"""`gpuprov serve`, `gpuprov db ...`, `gpuprov token ...` and the assembled command line."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import click
import httpx
import pytest
import typer
from sqlalchemy import text
from typer.testing import CliRunner

from app import cli
from app.domain.tokens import authenticate, create_token
from app.settings import Settings
from app.storage.session import Database
from gpuprov.cli import app as gpuprov_app
from scanner.cli_common import StrictCommand
from tests.app.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]


def _app() -> typer.Typer:
    app = typer.Typer()
    cli.register(app)
    return app


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(_app(), list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    code, _, err = _run("db", "upgrade", "--database-url", url)
    assert code == 0, err
    return url


def test_db_upgrade_and_current(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'new.db'}"
    code, out, _ = _run("db", "current", "--database-url", url)
    assert code == 1 and "run `gpuprov db upgrade`" in out
    code, _, err = _run("db", "upgrade", "--database-url", url)
    assert code == 0 and "revision head" in err
    code, out, _ = _run("db", "current", "--database-url", url)
    assert code == 0 and "is at revision" in out


def test_token_create_prints_the_secret_alone(db_url: str) -> None:
    code, out, err = _run(
        "token",
        "create",
        "--name",
        "agent-1",
        "--scope",
        "report:write",
        "--asset",
        "gpu-node-*",
        "--database-url",
        db_url,
    )
    assert code == 0, err
    secret = out.strip()
    assert out == secret + "\n" and secret.startswith("gpv_") and len(secret) > 40
    assert "created token" in err and secret not in err
    db = Database(Settings(database_url=db_url))
    try:
        with db.session() as session:
            principal = authenticate(session, secret)
    finally:
        db.dispose()
    assert principal.name == "agent-1" and principal.asset_patterns == ("gpu-node-*",)
    assert principal.may_report_for("gpu-node-3") and not principal.may_report_for("db-1")


def test_token_list_and_revoke(db_url: str) -> None:
    _run("token", "create", "--name", "ops", "--scope", "admin", "--database-url", db_url)
    code, out, _ = _run("token", "list", "--database-url", db_url)
    header, row = out.splitlines()
    assert header.split("\t") == ["id", "name", "prefix", "scopes", "state"]
    assert code == 0 and "\tops\t" in row and "active" in row
    token_id = row.split("\t", 1)[0]
    assert _run("token", "revoke", token_id, "--database-url", db_url)[0] == 0
    assert "revoked" in _run("token", "list", "--database-url", db_url)[1]
    assert _run("token", "revoke", "999", "--database-url", db_url)[0] == 1


def test_token_revoke_by_the_secret_a_file_holds(db_url: str, tmp_path: Path) -> None:
    """`make run` revokes its earlier tokens by the secrets it wrote, never by a name anyone
    could give another token."""
    made = [
        _run("token", "create", "--name", name, "--scope", "admin", "--database-url", db_url)[1]
        for name in ("run-admin-1", "run-admin-1")  # the same name, two tokens
    ]
    kept = tmp_path / "admin.token"
    kept.write_text(made[0])
    code, _, err = _run("token", "revoke", "--secret-file", str(kept), "--database-url", db_url)
    assert code == 0 and "revoked token 1" in err
    listed = _run("token", "list", "--database-url", db_url)[1].splitlines()[1:]  # after the header
    assert listed[0].startswith("1\t") and "revoked" in listed[0]
    assert listed[1].startswith("2\t") and "active" in listed[1]
    # again: idempotent; a secret of no token, an empty or unreadable file, both or neither
    assert _run("token", "revoke", "--secret-file", str(kept), "--database-url", db_url)[0] == 0
    kept.write_text("gpv_no-such-token\n")
    code, _, err = _run("token", "revoke", "--secret-file", str(kept), "--database-url", db_url)
    assert code == 1 and "no token has this secret" in err
    for content in ("", "\n", "x" * 5000, "gpv_a\x1bb"):
        kept.write_text(content)
        code, _, err = _run("token", "revoke", "--secret-file", str(kept), "--database-url", db_url)
        assert code == 2 and "does not hold a token secret" in err, content
    missing = str(tmp_path / "none")
    code, _, err = _run("token", "revoke", "--secret-file", missing, "--database-url", db_url)
    assert code == 2 and "cannot read" in err
    for args in ((), ("2", "--secret-file", str(kept))):
        code, _, err = _run("token", "revoke", *args, "--database-url", db_url)
        assert code == 2 and "give a token id or --secret-file" in err
    # token 2, after the header line and token 1
    assert "active" in _run("token", "list", "--database-url", db_url)[1].splitlines()[2]


def test_token_list_shows_names_printable(db_url: str) -> None:
    """A stored name holding a tab, a newline or an escape sequence is shown escaped, one token
    a line."""
    db = Database(Settings(database_url=db_url))
    try:
        with db.transaction(write=True) as session:
            new = create_token(session, "ci", ["gate"], [])
            # a name stored before names were checked for control characters
            new.token.name = "ci\t1\n2\tforged\x1b[2J"
    finally:
        db.dispose()
    code, out, _ = _run("token", "list", "--database-url", db_url)
    assert code == 0
    _header, line = out.splitlines()
    assert line.split("\t")[1] == "ci\\t1\\n2\\tforged\\x1b[2J" and "\x1b" not in out


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--scope", "root"], "unknown or missing scopes ['root']"),
        (["--scope", "inventory:read", "--asset", "x*"], "only apply"),
    ],
)
def test_token_create_refuses_bad_options(db_url: str, args: list[str], fragment: str) -> None:
    code, out, err = _run("token", "create", "--name", "n", *args, "--database-url", db_url)
    assert code == cli.EXIT_USAGE and out == "" and fragment in err


def test_token_create_without_schema(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'none.db'}"
    code, out, err = _run(
        "token", "create", "--name", "n", "--scope", "admin", "--database-url", url
    )
    assert code == 1 and out == "" and "gpuprov db upgrade" in err


def test_bad_settings_are_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUPROV_ENVIRONMENT", "production")
    code, _, err = _run("db", "upgrade", "--database-url", f"sqlite:///{tmp_path / 'x.db'}")
    assert code == cli.EXIT_USAGE and "GPUPROV_SECRET_KEY" in err


def test_serve_runs_the_service(db_url: str) -> None:
    port = free_port()
    env = {**os.environ, "GPUPROV_DATABASE_URL": db_url}
    code = "from gpuprov.cli import main; main()"
    process = subprocess.Popen(
        [sys.executable, "-c", code, "serve", "--port", str(port), "--workers", "2"]
        + ["--log-level", "warning"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        # two workers each import the app (jsonschema's format checkers alone take ~1.5 s of
        # CPU): generous on a loaded machine
        deadline = time.monotonic() + 90
        while True:
            try:
                ready = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1)
                break
            except httpx.TransportError:
                assert process.poll() is None, process.communicate()[0]
                assert time.monotonic() < deadline
                time.sleep(0.1)
        assert ready.status_code == 200 and ready.json()["status"] == "ready"
        assert "server" not in ready.headers and ready.headers["x-content-type-options"]
        docs = httpx.get(f"http://127.0.0.1:{port}/openapi.json", timeout=5)
        assert "/api/v1/where-used" in docs.json()["paths"]
    finally:
        process.terminate()
        process.wait(timeout=60)


def test_whole_command_line_and_lazy_imports() -> None:
    probe = (
        "import sys; from gpuprov.cli import main; sys.argv = ['gpuprov', '--help']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('fastapi', 'sqlalchemy', 'uvicorn', 'alembic') if m in sys.modules]\n"
        "print('HEAVY', heavy)"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    for command in ("scan", "push", "agent", "serve", "db", "token"):
        assert f" {command} " in result.stdout, result.stdout
    assert "HEAVY []" in result.stdout


def _one_line(out: str, err: str) -> str:
    text = (out + err).strip()
    assert "\n" not in text and "Traceback" not in text, text
    return text


def test_no_command_creates_an_empty_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After `make run` a `gpuprov token create` without the run's URL used to create an empty
    ./gpuprov.db and fail with `no such table`; `db current` created one too."""
    missing = tmp_path / "missing.db"
    url = f"sqlite:///{missing}"
    monkeypatch.setenv("GPUPROV_DATABASE_URL", url)
    for args in (
        ["db", "current", "--database-url", url],
        ["token", "create", "--name", "n", "--scope", "admin", "--database-url", url],
        ["token", "list", "--database-url", url],
        ["token", "revoke", "1", "--database-url", url],
        ["serve", "--port", str(free_port())],
    ):
        code, out, err = _run(*args)
        assert code == 1, (args, out, err)
        assert f"no database at {missing}: run `gpuprov db upgrade`" in _one_line(out, err)
        assert not missing.exists() and list(tmp_path.iterdir()) == [], args


def test_an_old_schema_is_one_clear_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from app.storage.migrate import head_revision

    url = f"sqlite:///{tmp_path / 'old.db'}"
    assert _run("db", "upgrade", "--database-url", url, "--revision", "0001")[0] == 0
    monkeypatch.setenv("GPUPROV_DATABASE_URL", url)
    for args in (
        ["db", "current"],
        ["token", "create", "--name", "n", "--scope", "admin"],
        ["token", "list"],
        ["token", "revoke", "1"],
        ["serve", "--port", str(free_port())],
    ):
        code, out, err = _run(*args)
        assert code == 1, (args, out, err)
        line = _one_line(out, err)
        assert f"at revision 0001 but this version of gpuprov needs {head_revision()}" in line
        assert line.endswith("run `gpuprov db upgrade`")


def test_a_schema_from_a_newer_gpuprov_is_one_clear_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'newer.db'}"
    assert _run("db", "upgrade", "--database-url", url)[0] == 0
    db = Database(Settings(database_url=url))
    with db.transaction(write=True) as session:
        session.execute(text("UPDATE alembic_version SET version_num = '9999_future'"))
    db.dispose()
    monkeypatch.setenv("GPUPROV_DATABASE_URL", url)
    for args, fragment in (
        (["db", "upgrade"], "cannot migrate the database: Can't locate revision"),
        (["db", "current"], "at revision 9999_future, which this version of gpuprov does not"),
        (["token", "list"], "at revision 9999_future, which this version of gpuprov does not"),
        (["serve", "--port", str(free_port())], "which this version of gpuprov does not know"),
    ):
        code, out, err = _run(*args)
        assert code == 1 and fragment in _one_line(out, err), (args, out, err)


# --- the whole command line: strict options, help text, one error style ----------------------


def _commands() -> list[tuple[list[str], click.Command]]:
    """Every command of `gpuprov` with its words (``["catalog", "verify"]``)."""
    root = typer.main.get_command(gpuprov_app)
    out: list[tuple[list[str], click.Command]] = []

    def walk(words: list[str], command: click.Command) -> None:
        if isinstance(command, click.Group):
            ctx = click.Context(command)
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                assert sub is not None, name
                walk([*words, name], sub)
        else:
            out.append((words, command))

    walk([], root)
    return out


def _invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(gpuprov_app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_the_walk_finds_every_command() -> None:
    names = {" ".join(words) for words, _ in _commands()}
    assert {"scan", "verify", "push", "agent", "serve", "db upgrade", "token create"} <= names
    assert {"catalog sign", "catalog verify", "trust check", "trust refresh-root"} <= names


def test_every_option_and_argument_has_help_text() -> None:
    missing = [
        f"{' '.join(words)} {param.name}"
        for words, command in _commands()
        for param in command.params
        if not (getattr(param, "help", None) or "").strip()
    ]
    assert missing == []


def test_every_command_refuses_a_single_valued_option_given_twice() -> None:
    checked = 0
    for words, command in _commands():
        assert isinstance(command, StrictCommand), words
        for param in command.params:
            if not isinstance(param, click.Option) or param.multiple or param.hidden:
                continue
            if param.is_flag and not param.secondary_opts:
                continue  # a bare flag says the same thing however often it is given
            opt = param.opts[-1]
            value = [] if param.is_flag else ["x"]
            code, _, err = _invoke(*words, opt, *value, opt, *value)
            assert code == 2, (words, opt, err)
            # a --flag/--no-flag pair is named with both its spellings
            names = "/".join([*param.opts, *param.secondary_opts])
            assert f"gpuprov: error: {names} was given 2 times" in err, err
            checked += 1
    assert checked > 30  # --trust, --server, --database-url, --format, ... of every command


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["scna"], "No such command 'scna'. Did you mean 'scan'?"),
        (["catalog", "verfy"], "No such command 'verfy'. Did you mean 'verify'?"),
        (
            ["scan", ".", "--fail-onn", "x"],
            "No such option '--fail-onn'. Did you mean '--fail-on'?",
        ),
        (["token", "create", "--name", "x"], "Missing option '--scope'."),
        (["serve", "--log-level", "loud"], "'loud' is not one of 'critical', 'error'"),
        (["push"], "give either a REPORT file or --spool"),
        (["agent", "--interval", "soon"], "--interval: 'soon' is not a duration"),
    ],
)
def test_usage_errors_have_one_style(args: list[str], message: str) -> None:
    code, _, err = _invoke(*args)
    assert code == 2
    lines = err.strip().splitlines()
    assert lines[0].startswith("Usage: gpuprov ")
    assert lines[-1].startswith("gpuprov: error: ")
    assert message in lines[-1]
    assert err.count("Did you mean") <= 1
    assert not any(ch in err for ch in "╭│╰")  # no box drawn around the message


def test_runtime_errors_have_one_style(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing")
    for args in (
        ["scan", missing],
        ["verify", missing, "--bundle", missing, "--key", missing],
        ["catalog", "sign", missing, "--key", missing],
        ["catalog", "verify", missing, "--trust-key", missing],
        ["push", missing, "--server", "http://127.0.0.1:9"],
        ["token", "list", "--database-url", f"sqlite:///{tmp_path}/no/such/dir/x.db"],
        ["db", "current", "--database-url", "postgresql+psycopg://u@127.0.0.1:9/none"],
    ):
        code, _, err = _invoke(*args)
        assert code in (1, 2), (args, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("gpuprov: error: "), (args, err)
        assert "Traceback" not in err


def test_token_scopes_and_assets_accumulate(db_url: str) -> None:
    code, _, err = _run(
        "token",
        "create",
        "--name",
        "agent",
        "--scope",
        "report:write",
        "--scope",
        "inventory:read,admin",
        "--asset",
        "gpu-node-*",
        "--asset",
        "ci-*",
        "--database-url",
        db_url,
    )
    assert code == 0, err
    code, out, _ = _run("token", "list", "--database-url", db_url)
    _header, line = out.splitlines()
    assert line.split("\t")[3] == "admin,inventory:read,report:write"
    assert line.endswith("assets=gpu-node-*,ci-*")
