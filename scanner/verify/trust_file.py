"""Loading a trust policy from YAML (`--trust FILE`, the service's stored policy).

The document is validated by a pydantic model (types, SLSA level ranges, unknown keys; every
error names its field path, e.g. `signers[0].key_pem`), then built into the
`scanner.verify.trust` model, whose own invariants (exactly one of a key or an identity, a
scope, signers for Build L2+ builders...) still apply. Whatever is wrong, the caller gets one
`VerifyError` with the reason, never another exception type.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails

from scanner.errors import VerifyError
from scanner.loaders import DocumentError, load_yaml
from scanner.verify.keys import TrustedKey
from scanner.verify.trust import (
    BuilderRule,
    IdentityRule,
    Scope,
    Signer,
    SlsaExpectation,
    TrustPolicy,
    UnsafeOption,
)
from scanner.verify.trusted_roots import PUBLIC_GOOD, SigstoreRoot

_log = logging.getLogger("gpuprov.trust")
_T = TypeVar("_T")


def load_trust_policy(path: Path) -> TrustPolicy:
    """Load a YAML trust policy file; relative paths in it are relative to the file."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise VerifyError(f"cannot read {path}: {e.strerror}") from e
    return parse_trust_policy(raw, source=str(path), base_dir=path.parent)


def parse_trust_policy(
    raw: bytes, *, source: str = "<policy>", base_dir: Path | None = None
) -> TrustPolicy:
    """Load a YAML trust policy from bytes (with the limits of `scanner.loaders.load_yaml`).
    Without `base_dir` (the service) keys and roots must be inline (`key_pem`,
    `trusted_root`): a file reference is refused."""
    try:
        data = load_yaml(raw)
    except DocumentError as e:
        raise VerifyError(f"trust policy {source} is not valid YAML: {e}") from e
    return trust_policy_from_document(data, base_dir=base_dir, source=source)


def trust_policy_from_document(
    data: object, *, base_dir: Path | None = Path("."), source: str = "<policy>"
) -> TrustPolicy:
    """Build a policy from its parsed YAML document (schema in docs/provenance.md);
    `base_dir=None` accepts inline keys and roots only."""
    try:
        doc = PolicyDocument.model_validate(data)
    except ValidationError as e:
        raise VerifyError(f"{source}: {'; '.join(_explain(d) for d in e.errors())}") from e
    except RecursionError as e:  # a self-referencing YAML alias
        raise VerifyError(f"{source}: the policy nests too deeply") from e
    roots = tuple(_root(r, base_dir, source) for r in doc.roots or (None,))
    signers = tuple(_signer(s, base_dir, source) for s in doc.signers)
    slsa = doc.slsa or SlsaDocument()
    builders = tuple(_builder(i, b, source) for i, b in enumerate(slsa.builders))
    expect = tuple(_expectation(i, e, source) for i, e in enumerate(slsa.expect))
    names = {s.name for s in signers}
    for i, builder in enumerate(builders):
        for name in builder.signers:
            if name not in names:
                raise VerifyError(
                    f"{source}: slsa.builders[{i}]: builder rule names unknown signer {name!r}"
                )
    return TrustPolicy(signers, roots, builders, expect, source)


# -- the document model ---------------------------------------------------------------------


def _no_surrogates(value: str) -> str:
    # YAML "\ud800" escapes give lone surrogates, which no UTF-8 encoder (PEM, JSON) accepts.
    try:
        value.encode()
    except UnicodeEncodeError as e:
        raise ValueError(f"not valid Unicode text: {e.reason}") from e
    return value


def _listed(value: object) -> object:
    """`families: cudnn` means `[cudnn]`; null means none."""
    if value is None:
        return []
    return [value] if isinstance(value, str) else value


def _none_is_empty(value: object) -> object:
    return [] if value is None else value


def _slsa_level(value: int) -> int:
    if not 0 <= value <= 3:
        raise ValueError("level must be 0..3 (SLSA Build levels)")
    return value


Text = Annotated[StrictStr, AfterValidator(_no_surrogates)]
Name = Annotated[Text, Field(min_length=1)]
Names = Annotated[tuple[Name, ...], BeforeValidator(_listed)]
SlsaLevel = Annotated[StrictInt, AfterValidator(_slsa_level)]


class _Document(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SignerDocument(_Document):
    """One entry of `signers:`."""

    name: Text = Field("", validate_default=True)
    key: Name | None = None
    key_pem: Text | None = None
    issuer: Text | None = None
    subject: Text | None = None
    subject_regex: Text | None = None
    families: Names = ()
    images: Names = ()
    unsafe: Annotated[tuple[UnsafeOption, ...], BeforeValidator(_listed)] = ()

    @field_validator("name")
    @classmethod
    def _named(cls, value: str) -> str:
        if not value:
            raise ValueError("every signer needs a name")
        return value


class RootDocument(_Document):
    """One mapping entry of `roots:` (the string `public-good` is the other kind)."""

    path: Name | None = None
    name: Text | None = None
    trusted_root: Text | None = None

    @field_validator("trusted_root", mode="before")
    @classmethod
    def _as_json(cls, value: object) -> object:
        """Inline trusted_root.json: a JSON string, or the same document as a YAML mapping."""
        if not isinstance(value, dict):
            return value
        try:
            return json.dumps(value)
        except (TypeError, ValueError, RecursionError) as e:
            raise ValueError(f"not a JSON document: {e}") from e

    @model_validator(mode="after")
    def _located(self) -> RootDocument:
        if self.path is None and self.trusted_root is None:
            raise ValueError(
                f"a root needs a path or trusted_root (or is the string {PUBLIC_GOOD!r})"
            )
        return self


def _public_good_or_mapping(value: object, handler: ValidatorFunctionWrapHandler) -> object:
    # After validation None stands for the shipped public-good root.
    if value == PUBLIC_GOOD:
        return None
    if not isinstance(value, dict):
        raise ValueError(f"a root is the string {PUBLIC_GOOD!r} or a mapping")
    return handler(value)


class BuilderDocument(_Document):
    """One entry of `slsa.builders:`."""

    id: Name | None = None
    id_regex: Text | None = None
    level: SlsaLevel
    signers: Names = ()


class ExpectationDocument(_Document):
    """One entry of `slsa.expect:`."""

    images: Names = ()
    source_repo: Text | None = None
    build_type: Text | None = None
    min_level: SlsaLevel = 0


class SlsaDocument(_Document):
    builders: Annotated[tuple[BuilderDocument, ...], BeforeValidator(_none_is_empty)] = ()
    expect: Annotated[tuple[ExpectationDocument, ...], BeforeValidator(_none_is_empty)] = ()


class PolicyDocument(_Document):
    """The whole YAML document (docs/provenance.md, "Trust policy")."""

    version: StrictInt = 1
    roots: Annotated[
        tuple[Annotated[RootDocument | None, WrapValidator(_public_good_or_mapping)], ...],
        BeforeValidator(_none_is_empty),
    ] = ()
    signers: Annotated[tuple[SignerDocument, ...], BeforeValidator(_none_is_empty)] = ()
    slsa: SlsaDocument | None = None

    @field_validator("version")
    @classmethod
    def _supported(cls, value: int) -> int:
        if value != 1:
            raise ValueError(f"unsupported policy version {value!r}")
        return value


def _field_path(loc: tuple[int | str, ...]) -> str:
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}" if path else part
    return path


def _explain(error: ErrorDetails) -> str:
    """One validation error as `field.path: what is wrong (got value)`."""
    kind = error["type"]
    if kind == "extra_forbidden":
        message = "unknown key"
    elif kind == "value_error":
        message = str(error.get("ctx", {}).get("error", error["msg"]))
    elif kind in ("model_type", "model_attributes_type", "dict_type"):
        message = "must be a mapping"
    elif kind == "missing":
        message = "is required"
    else:
        message = error["msg"][:1].lower() + error["msg"][1:]
        value = error.get("input")
        if value is None or isinstance(value, str | int | float):
            message += f" (got {value!r:.60})"
    path = _field_path(error["loc"])
    return f"{path}: {message}" if path else f"policy {message}"


# -- building the model -----------------------------------------------------------------------


def _within(where: str, build: Callable[[], _T]) -> _T:
    """`build()`, its VerifyError prefixed with where in the document it happened."""
    try:
        return build()
    except VerifyError as e:
        raise VerifyError(f"{where}: {e}") from e


def _root(entry: RootDocument | None, base_dir: Path | None, source: str) -> SigstoreRoot:
    if entry is None:
        return SigstoreRoot.public_good()
    if entry.trusted_root is not None:
        return SigstoreRoot.from_bytes(entry.trusted_root.encode(), entry.name or "inline root")
    assert entry.path is not None  # RootDocument._located
    if base_dir is None:
        raise VerifyError(
            f"{source}: root {entry.path!r} is a file reference; give its JSON inline as "
            "trusted_root"
        )
    root = SigstoreRoot.from_file(base_dir / entry.path)
    return root if not entry.name else SigstoreRoot.from_bytes(root.raw, entry.name)


def _signer(entry: SignerDocument, base_dir: Path | None, source: str) -> Signer:
    where = f"{source}: signer {entry.name!r}"
    unsafe = frozenset(entry.unsafe)
    for option in sorted(unsafe):
        _log.warning(
            "trust policy %s: signer %s enables UNSAFE %s", source, entry.name, option.value
        )
    key = None
    if entry.key_pem is not None:
        pem = entry.key_pem.encode()
        key = _within(where, lambda: TrustedKey.from_pem(pem))
    elif entry.key is not None:
        if base_dir is None:
            raise VerifyError(f"{where}: key {entry.key!r} is a file; inline it as key_pem")
        key_file = base_dir / entry.key
        key = _within(where, lambda: TrustedKey.from_pem_file(key_file))
    identity = None
    if entry.issuer is not None:
        identity = _within(
            where, lambda: IdentityRule(entry.issuer or "", entry.subject, entry.subject_regex)
        )
    scope = Scope(entry.families, entry.images)
    return _within(source, lambda: Signer(entry.name, scope, key, identity, unsafe))


def _builder(index: int, entry: BuilderDocument, source: str) -> BuilderRule:
    return _within(
        f"{source}: slsa.builders[{index}]",
        lambda: BuilderRule(entry.level, entry.id, entry.id_regex, entry.signers),
    )


def _expectation(index: int, entry: ExpectationDocument, source: str) -> SlsaExpectation:
    return _within(
        f"{source}: slsa.expect[{index}]",
        lambda: SlsaExpectation(entry.images, entry.source_repo, entry.build_type, entry.min_level),
    )
