"""The NVIDIA Container Toolkit's configuration file (``config.toml``), read for the settings
NVIDIA's bulletins make a vulnerability depend on.

Keys (NVIDIA/nvidia-container-toolkit ``internal/config`` 1.16, ``api/config/v1`` 1.17-1.20; the
defaults are ``GetDefault``'s):
- ``[nvidia-container-runtime] mode``: ``auto`` (default), ``legacy``, ``cdi``, ``csv``,
  ``jit-cdi`` (1.18+);
- ``[nvidia-container-runtime-hook] skip-mode-detection``: the hook (Docker's ``--gpus``, the
  OCI hook of Podman) runs the legacy path even when ``mode`` is not legacy (default false);
- ``[nvidia-container-cli] ldconfig``: the ldconfig the legacy path runs; a leading ``@`` names
  a host path (default ``@/sbin/ldconfig``), anything else a path in the container's files;
- ``[features] allow-cuda-compat-libs-from-container`` (1.17.4+, default false; the GPU
  Operator's ``NVIDIA_CONTAINER_TOOLKIT_OPT_IN_FEATURES`` is written here as ``true`` by its
  installer, ``cmd/nvidia-ctk-installer/toolkit``);
- ``[nvidia-container-runtime.modes.legacy] cuda-compat-mode`` (1.17.7+): ``ldconfig`` (default),
  ``mount`` (the compat libraries are mounted from the container as before the 1.17.4 fix),
  ``disabled``, ``hook``.

Parsing is pure (tomllib): a text that is no TOML, or a key of another type than the toolkit
reads, is a `ConfigError` and decides nothing.
"""

from __future__ import annotations

from typing import Any, Final

from msgspec import Struct

#: Where the toolkit reads its configuration: the packages' path, and the GPU Operator's
#: toolkit root (its runtime wrapper sets XDG_CONFIG_HOME=/usr/local/nvidia/toolkit/.config).
CONFIG_PATHS: Final = (
    "/etc/nvidia-container-runtime/config.toml",
    "/usr/local/nvidia/toolkit/.config/nvidia-container-runtime/config.toml",
)


class ConfigError(ValueError):
    """A config.toml that cannot be read as the toolkit reads it; the message says why."""


class ToolkitConfig(Struct, frozen=True):
    """The settings of one config.toml that conditions depend on (None: the key is absent,
    so the toolkit's default applies)."""

    source: str
    mode: str | None = None
    skip_mode_detection: bool = False
    ldconfig: str | None = None
    allow_cuda_compat_libs: bool = False
    cuda_compat_mode: str | None = None


def _table(doc: dict[str, Any], *path: str) -> dict[str, Any]:
    at = doc
    for i, key in enumerate(path):
        found = at.get(key, {})
        if not isinstance(found, dict):
            raise ConfigError(f"[{'.'.join(path[: i + 1])}] is not a table")
        at = found
    return at


def _get(table: dict[str, Any], section: str, key: str, kind: type) -> Any:
    value = table.get(key)
    if value is not None and not isinstance(value, kind):
        raise ConfigError(
            f"{section}.{key} is a {type(value).__name__}, the toolkit reads a {kind.__name__}"
        )
    return value


def parse_config(text: str, source: str) -> ToolkitConfig:
    """One config.toml's settings; raises ConfigError."""
    import tomllib  # only a node with a toolkit config parses TOML (start-up cost)

    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"not TOML: {e}") from None
    runtime = _table(doc, "nvidia-container-runtime")
    hook = _table(doc, "nvidia-container-runtime-hook")
    cli = _table(doc, "nvidia-container-cli")
    features = _table(doc, "features")
    legacy = _table(doc, "nvidia-container-runtime", "modes", "legacy")
    return ToolkitConfig(
        source=source,
        mode=_get(runtime, "nvidia-container-runtime", "mode", str),
        skip_mode_detection=bool(
            _get(hook, "nvidia-container-runtime-hook", "skip-mode-detection", bool)
        ),
        ldconfig=_get(cli, "nvidia-container-cli", "ldconfig", str),
        allow_cuda_compat_libs=bool(
            _get(features, "features", "allow-cuda-compat-libs-from-container", bool)
        ),
        cuda_compat_mode=_get(
            legacy, "nvidia-container-runtime.modes.legacy", "cuda-compat-mode", str
        ),
    )
