"""One pure function per policy rule: (rule settings, context) -> Outcome.

Each rule says pass, fail or not_applicable, always with a message a reviewer understands.
A rule whose inputs are missing (no verdict in the facts, no fleet baseline) fails and says
which input is missing: evaluation never passes what it could not see.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from datetime import datetime
from enum import StrEnum
from functools import lru_cache
from typing import Any

from msgspec import Struct, field

from scanner.detect.classifiers import DRIVER_FAMILIES
from scanner.model import AssetKind
from scanner.policy import document as D
from scanner.policy.drivers import DriverTable
from scanner.policy.facts import AssetFacts, FileFact
from scanner.versions import VersionFilter, normalize_version, parse_version_filter, version_matches


class Status(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    NOT_APPLICABLE = "not_applicable"


class Outcome(Struct, frozen=True):
    status: Status
    message: str
    files: tuple[FileFact, ...] = ()
    evidence: tuple[tuple[str, str], ...] = ()
    #: the rule failed because an input it needs is absent, not because a fact is wrong
    missing_input: bool = False


class FleetBaseline(Struct, frozen=True):
    """The versions that assets labelled ``label=value`` run (the parity rule's fleet context)."""

    label: str
    value: str
    versions: dict[str, frozenset[str]] = field(default_factory=dict)  # family -> versions
    assets: int = 0


def baseline_of(label: str, value: str, assets: Iterable[AssetFacts]) -> FleetBaseline:
    """A fleet baseline from the facts of the baseline's assets (those labelled label=value)."""
    versions: dict[str, set[str]] = defaultdict(set)
    count = 0
    for asset in assets:
        count += 1
        for f in asset.files:
            if f.version:
                versions[f.family].add(normalize_version(f.version) or f.version)
    return FleetBaseline(label, value, {k: frozenset(v) for k, v in versions.items()}, count)


class Context(Struct, frozen=True):
    facts: AssetFacts
    now: datetime
    drivers: DriverTable
    baseline: FleetBaseline | None = None


def _pass(message: str, **evidence: Any) -> Outcome:
    return Outcome(Status.PASS, message, evidence=_ev(evidence))


def _na(message: str) -> Outcome:
    return Outcome(Status.NOT_APPLICABLE, message)


def _fail(message: str, files: Iterable[FileFact] = (), **evidence: Any) -> Outcome:
    return Outcome(Status.FAIL, message, tuple(files), _ev(evidence))


def _missing(message: str, files: Iterable[FileFact] = (), **evidence: Any) -> Outcome:
    return Outcome(Status.FAIL, message, tuple(files), _ev(evidence), missing_input=True)


def _ev(evidence: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple((k, str(v)) for k, v in evidence.items() if v is not None)


def _paths(files: Iterable[FileFact], limit: int = 3) -> str:
    items = [f.path for f in files]
    more = f" and {len(items) - limit} more" if len(items) > limit else ""
    return ", ".join(items[:limit]) + more


def signer_name(identity: str | None) -> str | None:
    """The trust policy's signer name in a recorded identity ("release-key (ecdsa ...)")."""
    return identity.split(" (", 1)[0] if identity else None


def _no_files(ctx: Context) -> Outcome | None:
    if not ctx.facts.files:
        return _na("the asset holds no GPU library file")
    return None


# -- integrity ---------------------------------------------------------------------------------


def integrity(rule: D.IntegrityRule, ctx: Context) -> Outcome:
    if (na := _no_files(ctx)) is not None:
        return na
    unknown = [f for f in ctx.facts.files if f.integrity is None]
    # a file known to be bad is the headline; files without a verdict are named after it
    bad = [f for f in ctx.facts.files if f.integrity in rule.forbid]
    if bad:
        kinds = sorted({f.integrity or "" for f in bad})
        return _fail(
            f"{len(bad)} GPU library file(s) have a forbidden integrity verdict "
            f"({', '.join(kinds)}): {_paths(bad)}; "
            + "; ".join(f"{f.path}: {f.integrity_reason}" for f in bad[:3] if f.integrity_reason)
            + (f"; {len(unknown)} more have no verdict" if unknown else ""),
            bad + unknown,
            forbid=",".join(rule.forbid),
        )
    if unknown:
        return _missing(
            f"{len(unknown)} GPU library file(s) have no integrity verdict (the facts come from "
            f"{ctx.facts.producer}, which does not compare files with their packages): "
            f"{_paths(unknown)}; scan with gpuprov to gate integrity",
            unknown,
        )
    return _pass(
        f"all {len(ctx.facts.files)} GPU library files avoid {', '.join(rule.forbid)}",
        forbid=",".join(rule.forbid),
    )


# -- ownership ---------------------------------------------------------------------------------


@lru_cache(maxsize=256)
def _glob(pattern: str) -> re.Pattern[str]:
    # "**" crosses directories, "*" and "?" stay within one path component
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**", i):
            out += ".*"
            i += 2
        elif pattern[i] == "*":
            out += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            out += "[^/]"
            i += 1
        else:
            out += re.escape(pattern[i])
            i += 1
    return re.compile(out)


def ownership(rule: D.OwnershipRule, ctx: Context) -> Outcome:
    if (na := _no_files(ctx)) is not None:
        return na
    unknown = [f for f in ctx.facts.files if f.integrity is None]
    unowned = [f for f in ctx.facts.files if f.integrity == "unowned"]
    bad = [f for f in unowned if not any(_glob(g).fullmatch(f.path) for g in rule.allow_unowned)]
    if bad:
        return _fail(
            f"{len(bad)} GPU library file(s) belong to no package and no allow_unowned glob "
            f"matches them: {_paths(bad)}"
            + (f"; {len(unknown)} more have no owner verdict" if unknown else ""),
            bad + unknown,
            allow_unowned=",".join(rule.allow_unowned) or None,
        )
    if unknown:
        return _missing(
            f"{len(unknown)} GPU library file(s) have no owner verdict (the facts come from "
            f"{ctx.facts.producer}): {_paths(unknown)}",
            unknown,
        )
    allowed = len(unowned)
    return _pass(
        "every GPU library file is owned by a package"
        + (f" ({allowed} unowned file(s) allowed by allow_unowned)" if allowed else "")
    )


# -- provenance --------------------------------------------------------------------------------


def provenance(rule: D.ProvenanceRule, ctx: Context) -> Outcome:
    if (na := _no_files(ctx)) is not None:
        return na
    files = ctx.facts.files
    conflict = [f for f in files if f.provenance == "conflict"]
    if conflict:
        # a digest that contradicts a signed catalog always fails, whatever `require` says
        return _fail(
            f"{len(conflict)} GPU library file(s) contradict a signed reference catalog: "
            + "; ".join(f"{f.path}: {f.provenance_reason}" for f in conflict[:3]),
            conflict,
        )
    unknown = [f for f in files if f.provenance is None]
    if unknown:
        return _missing(
            f"provenance was not evaluated for {len(unknown)} GPU library file(s) ("
            + (
                "scan with --catalog and --trust"
                if ctx.facts.producer.startswith("gpuprov")
                else f"the BOM comes from {ctx.facts.producer}"
            )
            + f"): {_paths(unknown)}",
            unknown,
        )
    if rule.require == "verified":
        unverified = [f for f in files if f.provenance != "verified"]
        if unverified:
            return _fail(
                f"{len(unverified)} GPU library file(s) are in no signed reference catalog: "
                f"{_paths(unverified)}",
                unverified,
            )
    if rule.signers:
        foreign = [
            f
            for f in files
            if f.provenance == "verified" and signer_name(f.provenance_signer) not in rule.signers
        ]
        if foreign:
            return _fail(
                f"{len(foreign)} GPU library file(s) are vouched for by a signer outside "
                f"{', '.join(rule.signers)}: "
                + "; ".join(f"{f.path} ({f.provenance_signer})" for f in foreign[:3]),
                foreign,
                signers=",".join(rule.signers),
            )
    verified = sum(f.provenance == "verified" for f in files)
    return _pass(f"no file contradicts a signed catalog; {verified}/{len(files)} verified")


# -- versions ----------------------------------------------------------------------------------


@lru_cache(maxsize=1024)
def _filter(expr: str) -> VersionFilter:
    return parse_version_filter(expr)


def versions(rule: D.VersionsRule, ctx: Context) -> Outcome:
    named = set(rule.allow) | set(rule.deny) | set(rule.minimum)
    files = [f for f in ctx.facts.files if f.family in named]
    if not files:
        return _na(
            f"the asset holds none of the families the rule names ({', '.join(sorted(named))})"
        )
    unknown = [f for f in files if not f.version]
    bad: list[tuple[FileFact, str]] = []
    for f in files:
        if not f.version:
            continue
        if f.family in rule.allow and not version_matches(f.version, _filter(rule.allow[f.family])):
            bad.append((f, f"{f.family} {f.version} is outside allow {rule.allow[f.family]}"))
        for expr in rule.deny.get(f.family, ()):
            if version_matches(f.version, _filter(expr)):
                bad.append((f, f"{f.family} {f.version} matches deny {expr}"))
        if f.family in rule.minimum and not version_matches(
            f.version, _filter(">=" + rule.minimum[f.family])
        ):
            bad.append((f, f"{f.family} {f.version} is below minimum {rule.minimum[f.family]}"))
    if bad:
        whys = list(dict.fromkeys(why for _, why in bad))
        return _fail(
            "; ".join(whys) + f" ({_paths(dict.fromkeys(f for f, _ in bad))})",
            dict.fromkeys(f for f, _ in bad),
        )
    if unknown:
        return _missing(
            f"the version of {len(unknown)} file(s) is unknown, so the version rule cannot "
            f"judge them: {_paths(unknown)}",
            unknown,
        )
    held = ", ".join(sorted({f.family for f in files}))  # not every family the rule names
    return _pass(f"{len(files)} file(s) of {held} within the allowed versions")


# -- cuda_pairing ------------------------------------------------------------------------------

#: Families that carry no "built for CUDA N" dependency on cudart.
_NOT_PAIRED = frozenset({"cudart", *DRIVER_FAMILIES})


def cuda_pairing(rule: D.EmptyRule, ctx: Context) -> Outcome:
    dependents = [
        f for f in ctx.facts.files if f.family not in _NOT_PAIRED and f.cuda_major is not None
    ]
    if not dependents:
        return _na("no library built for a CUDA major (cuDNN, cuBLAS, NCCL, ...) in the asset")
    runtimes = {f.cuda_major for f in ctx.facts.files if f.family == "cudart"}
    if not runtimes:
        return _na("no cudart in the asset: the CUDA runtime comes from elsewhere")
    if None in runtimes:
        unknown = [f for f in ctx.facts.files if f.family == "cudart" and f.cuda_major is None]
        return _missing(f"the CUDA major of cudart is unknown: {_paths(unknown)}", unknown)
    have = ", ".join(str(m) for m in sorted(m for m in runtimes if m is not None))
    bad = [f for f in dependents if f.cuda_major not in runtimes]
    if bad:
        return _fail(
            "; ".join(
                dict.fromkeys(
                    f"{f.family} {f.version or ''} built for CUDA {f.cuda_major} but the asset's "
                    f"cudart is CUDA {have}"
                    for f in bad
                )
            )
            + f" ({_paths(bad)}): it loads, then fails at the first call",
            bad,
            cudart_majors=have,
        )
    return _pass(f"{len(dependents)} file(s) built for CUDA {have}, matching cudart")


# -- mixed_cudnn -------------------------------------------------------------------------------


def _release(version: str) -> str:
    # major.minor.patch: the build number is not part of a sub-library's release
    return ".".join((normalize_version(version) or version).split(".")[:3])


def _directory(path: str) -> str:
    return path.rsplit("/", 1)[0] or "/"


def mixed_cudnn(rule: D.EmptyRule, ctx: Context) -> Outcome:
    cudnn = [f for f in ctx.facts.files if f.family == "cudnn"]
    if not cudnn:
        return _na("no cuDNN in the asset")
    groups: dict[str, list[FileFact]] = defaultdict(list)
    for f in cudnn:
        groups[_directory(f.path)].append(f)
    mixed: list[str] = []
    unknown: list[str] = []
    bad: list[FileFact] = []
    for directory, group in sorted(groups.items()):
        releases = sorted({_release(f.version) for f in group if f.version})
        if len(releases) > 1:
            mixed.append(
                f"cuDNN sub-libraries in {directory} are at different versions "
                f"({', '.join(releases)}): "
                + ", ".join(f"{f.component} {f.version}" for f in group)
            )
            bad.extend(group)
        elif len(group) > 1 and (nameless := [f for f in group if not f.version]):
            unknown.append(
                f"the version of {len(nameless)} cuDNN sub-library(ies) in {directory} is "
                f"unknown, so they cannot be shown to match: {_paths(nameless)}"
            )
            bad.extend(nameless)
    if mixed:
        return _fail("; ".join(mixed + unknown), bad)
    if unknown:
        return _missing("; ".join(unknown), bad)
    return _pass(f"cuDNN sub-libraries agree in each of {len(groups)} directory(ies)")


# -- duplicates --------------------------------------------------------------------------------

#: The default loader search path: one place for the dynamic loader (ld.so(8), multiarch).
_DEFAULT_PATH = frozenset(
    {
        "/lib",
        "/usr/lib",
        "/lib64",
        "/usr/lib64",
        "/lib/x86_64-linux-gnu",
        "/usr/lib/x86_64-linux-gnu",
        "/lib/aarch64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
    }
)


def duplicates(rule: D.EmptyRule, ctx: Context) -> Outcome:
    groups: dict[tuple[str, str, str], list[FileFact]] = defaultdict(list)
    for f in ctx.facts.files:
        if not f.version or f.family in DRIVER_FAMILIES:
            continue
        directory = _directory(f.path)
        where = "the default loader path" if directory in _DEFAULT_PATH else directory
        groups[(where, f.component, f.version.split(".")[0])].append(f)
    if not groups:
        return _na("no GPU library with a known version in the asset")
    found: list[str] = []
    bad: list[FileFact] = []
    for (where, component, _major), group in sorted(groups.items()):
        releases = sorted({_release(f.version or "") for f in group})
        if len(releases) > 1:
            found.append(
                f"{component} is present at {len(releases)} versions ({', '.join(releases)}) "
                f"on {where}"
            )
            bad.extend(group)
    if found:
        return _fail(
            "; ".join(found) + ": which one loads depends on symlinks and search order", bad
        )
    return _pass("no library is present at two versions on one loader path")


# -- driver ------------------------------------------------------------------------------------


def _minor(version: str | None) -> tuple[int, int] | None:
    """(major, minor) of a version ("12.4.127" -> (12, 4))."""
    m = re.match(r"^(\d+)\.(\d+)", version or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def driver(rule: D.DriverRule, ctx: Context) -> Outcome:
    if ctx.facts.kind is not AssetKind.HOST:
        return _na("an image carries no driver: the rule applies to the hosts that run it")
    majors = sorted(
        {
            f.cuda_major
            for f in ctx.facts.files
            if f.cuda_major is not None and f.family not in DRIVER_FAMILIES
        }
    )
    if not majors:
        return _na("no CUDA library with a known CUDA major on the host")
    table = ctx.drivers
    source = f"{table.source_name} <{table.source_url}>"
    have = ctx.facts.driver_version
    cuda_max = _minor(ctx.facts.driver_cuda_max)
    supports = f" (supports CUDA <= {ctx.facts.driver_cuda_max})" if cuda_max else ""
    if have is None and cuda_max is None:
        return _missing(
            f"the host's driver version is unknown (no kernel module version, no versioned "
            f"libcuda or libnvidia-ml), CUDA {majors[-1]} needs >= "
            f"{table.minimum.get(majors[-1], '?')}",
            source=source,
        )
    for major in reversed(majors):
        users = [f for f in ctx.facts.files if f.cuda_major == major]
        if cuda_max is not None and major > cuda_max[0]:
            return _fail(
                f"driver {have or '(L4T)'}{supports} cannot run CUDA {major} ({_paths(users)})",
                users,
                driver=have,
                cuda_max=ctx.facts.driver_cuda_max,
            )
        ok = table.satisfies(have, major) if have is not None else None
        if ok is None and cuda_max is None:
            return _missing(
                f"no minimum driver is known for CUDA {major} (table: {source})", source=source
            )
        if ok is False:
            return _fail(
                f"driver {have} is older than {table.minimum[major]}, the minimum for CUDA "
                f"{major} ({_paths(users)})",
                users,
                driver=have,
                minimum=table.minimum[major],
                source=source,
            )
    runtimes = sorted(
        {
            (v, f.version or "")
            for f in ctx.facts.files
            if f.family == "cudart"
            if (v := _minor(f.version)) is not None
        }
    )
    newer = [version for v, version in runtimes if cuda_max is not None and v > cuda_max]
    if newer and not rule.minor_version_compatibility:
        users = [f for f in ctx.facts.files if f.family == "cudart" and f.version in newer]
        return _fail(
            f"CUDA runtime {', '.join(newer)} is newer than the CUDA "
            f"{ctx.facts.driver_cuda_max} driver {have or '(L4T)'} supports ({_paths(users)}); "
            "minor_version_compatibility is off",
            users,
            driver=have,
            cuda_max=ctx.facts.driver_cuda_max,
        )
    compat = (
        f"; CUDA runtime {', '.join(newer)} runs under minor-version compatibility (no PTX JIT "
        "of newer code)"
        if newer
        else ""
    )
    return _pass(
        f"driver {have or '(L4T)'}{supports} runs CUDA {', '.join(map(str, majors))}{compat}",
        driver=have,
        cuda_max=ctx.facts.driver_cuda_max,
        source=source,
    )


# -- loaded ------------------------------------------------------------------------------------


def loaded(rule: D.LoadedRule, ctx: Context) -> Outcome:
    if ctx.facts.kind is not AssetKind.HOST:
        return _na("an image runs no process: the rule applies to the hosts that run it")
    if not ctx.facts.runtime:
        return _missing(
            "the host's scan did not look at live processes, so what they have loaded is "
            f"unknown (scan with --runtime; the facts come from {ctx.facts.producer})"
        )
    forbid = set(rule.forbid)
    files = ctx.facts.files
    bad: list[tuple[FileFact, str]] = []
    for f in files:
        if not f.loaded_processes:
            continue
        if D.LoadedKind.DELETED in forbid and f.loaded_deleted:
            bad.append(
                (
                    f,
                    f"{f.path} is loaded by {f.loaded_processes} process(es) but deleted "
                    "or replaced on disk",
                )
            )
        if D.LoadedKind.DIFFERS in forbid and f.disk_sha256:
            bad.append(
                (f, f"{f.path}: loaded bytes {f.sha256} differ from the disk's {f.disk_sha256}")
            )
        if D.LoadedKind.UNOWNED in forbid and f.integrity == "unowned":
            bad.append(
                (
                    f,
                    f"{f.path} is loaded by {f.loaded_processes} process(es) and belongs "
                    "to no package",
                )
            )
    if bad:
        whys = list(dict.fromkeys(why for _, why in bad))
        more = f" and {len(whys) - 3} more" if len(whys) > 3 else ""
        return _fail(
            "; ".join(whys[:3]) + more,
            dict.fromkeys(f for f, _ in bad),
            forbid=",".join(rule.forbid),
        )
    if ctx.facts.runtime_unreadable:
        return _missing(
            "what some processes have loaded could not be read: "
            + "; ".join(ctx.facts.runtime_unreadable[:3])
        )
    loaded_files = sum(1 for f in files if f.loaded_processes)
    return _pass(
        f"{loaded_files} loaded GPU library file(s) avoid {', '.join(rule.forbid)}",
        forbid=",".join(rule.forbid),
    )


# -- image_signature and slsa ------------------------------------------------------------------


def image_signature(rule: D.ImageSignatureRule, ctx: Context) -> Outcome:
    if ctx.facts.kind is not AssetKind.IMAGE:
        return _na("a host has no image signature")
    trust = ctx.facts.image_trust
    if trust is None:
        return _missing(
            "the image's signatures were not checked (scan with --trust or --trust-key)"
        )
    if trust.signer is None:
        return _fail(
            "the image has no signature accepted by the trust policy: "
            + ("; ".join(trust.rejected) or "none found"),
            rejected="; ".join(trust.rejected) or None,
        )
    if rule.signers and signer_name(trust.signer) not in rule.signers:
        return _fail(
            f"the image is signed by {trust.signer}, not by {', '.join(rule.signers)}",
            signer=trust.signer,
        )
    return _pass(f"signed by {trust.signer}", signer=trust.signer)


def slsa(rule: D.SlsaRule, ctx: Context) -> Outcome:
    if ctx.facts.kind is not AssetKind.IMAGE:
        return _na("SLSA Build levels are about built artifacts; a host is not one")
    trust = ctx.facts.image_trust
    if trust is None:
        return _missing("the image's provenance was not checked (scan with --trust or --trust-key)")
    level = trust.slsa_level
    if level is None or level < rule.min_level:
        return _fail(
            f"SLSA Build level {level if level is not None else 'none'} (no accepted provenance)"
            if level is None
            else f"SLSA Build level {level} is below the required {rule.min_level}",
            level=level,
            required=rule.min_level,
            builder=trust.builder,
        )
    return _pass(f"SLSA Build level {level} (builder {trust.builder})", level=level)


# -- scan_age ----------------------------------------------------------------------------------


def scan_age(rule: D.ScanAgeRule, ctx: Context) -> Outcome:
    at = ctx.facts.scanned_at
    if at is None:
        return _missing("the scan time is unknown (the BOM has no metadata.timestamp)")
    hours = (ctx.now - at).total_seconds() / 3600
    if hours > rule.max_hours:
        return _fail(
            f"the inventory is {hours:.1f} h old (scanned {at.isoformat()}), more than "
            f"{rule.max_hours:g} h: scan again",
            scanned_at=at.isoformat(),
        )
    return _pass(f"scanned {hours:.1f} h ago", scanned_at=at.isoformat())


# -- parity ------------------------------------------------------------------------------------


def parity(rule: D.ParityRule, ctx: Context) -> Outcome:
    own = ctx.facts.label(rule.label)
    if own is not None and own != rule.target:
        return _na(
            f"the asset is {rule.label}={own}; the rule applies to {rule.label}={rule.target}"
        )
    base = ctx.baseline
    if base is None or base.label != rule.label or base.value != rule.baseline:
        return _missing(
            f"no fleet baseline of {rule.label}={rule.baseline} was given, so versions "
            f"cannot be compared with it"
        )
    if base.assets == 0:
        return _missing(f"the baseline {rule.label}={rule.baseline} has no asset")
    new = [
        f
        for f in ctx.facts.files
        if f.version
        and (normalize_version(f.version) or f.version) not in base.versions.get(f.family, ())
    ]
    if new:
        return _fail(
            f"{len(new)} GPU library version(s) never ran in {rule.label}={rule.baseline}: "
            + ", ".join(dict.fromkeys(f"{f.family} {f.version}" for f in new)),
            new,
            baseline=f"{rule.label}={rule.baseline} ({base.assets} assets)",
        )
    return _pass(f"every GPU library version also runs in {rule.label}={rule.baseline}")


#: Rule id -> its function (every id of scanner.policy.document.RULE_IDS but those kept in a
#: module of their own: scanner.policy.evaluate.RULE_FUNCTIONS holds them all).
RULES: dict[str, Callable[[Any, Context], Outcome]] = {
    "integrity": integrity,
    "ownership": ownership,
    "provenance": provenance,
    "versions": versions,
    "cuda_pairing": cuda_pairing,
    "mixed_cudnn": mixed_cudnn,
    "duplicates": duplicates,
    "driver": driver,
    "loaded": loaded,
    "image_signature": image_signature,
    "slsa": slsa,
    "scan_age": scan_age,
    "parity": parity,
}
