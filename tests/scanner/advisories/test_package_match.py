"""OSV statements against an asset's packages (scanner/advisories/package_match.py through
``match``): PyPI wheels by PEP 503 name and PEP 440 version, Debian source packages on their
release, the Container Toolkit's Go module through its product; an unreadable range is affected
for review, an absent package gives no finding."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scanner.advisories.match import AssetFacts, Finding, Installed, match, status_entry
from scanner.advisories.osv import read_osv
from scanner.advisories.package_match import InstalledPackage, package_of
from tests.scanner.advisories.documents import encode, osv

CUDNN = "pkg:pypi/nvidia-cudnn-cu12@{}"


def _osv(affected: list[dict[str, Any]], **extra: Any) -> tuple[str, list[Any]]:
    doc = osv(**extra)
    doc["affected"] = affected
    (vuln,) = read_osv(encode(doc)).vulnerabilities
    return vuln.id, [status_entry(s, "osv") for s in vuln.statuses]


def _pkg(ecosystem: str, name: str, *events: dict[str, str], **more: Any) -> dict[str, Any]:
    return {
        "package": {"ecosystem": ecosystem, "name": name},
        "ranges": [{"type": "SEMVER" if ecosystem == "Go" else "ECOSYSTEM", "events": events}],
        **more,
    }


def _match(
    entries: tuple[str, list[Any]], *packages: InstalledPackage | None, **kw: Any
) -> list[Finding]:
    cve, statuses = entries
    held = tuple(p for p in packages if p is not None)
    return match(cve, statuses, AssetFacts(packages=held, **kw))


CUDNN_9 = _osv([_pkg("PyPI", "nvidia-cudnn-cu12", {"introduced": "9.0.0"}, {"fixed": "9.1.0.70"})])


@pytest.mark.parametrize(
    ("version", "status", "fixed_in"),
    [
        ("9.0.0.312", "affected", "9.1.0.70"),
        ("9.0.0", "affected", "9.1.0.70"),
        ("9.1.0.70", "fixed", "9.1.0.70"),
        ("9.3.0.75", "fixed", "9.1.0.70"),
        ("8.9.7.29", "not_affected", None),  # before the flaw was introduced
    ],
)
def test_a_pypi_wheel_is_judged_by_pep_440(version: str, status: str, fixed_in: str) -> None:
    (f,) = _match(CUDNN_9, package_of(CUDNN.format(version)))
    assert (f.cve, f.status, f.installed, f.fixed_in) == (
        "CVE-2026-1111",
        status,
        version,
        fixed_in,
    )
    assert f.product == "PyPI/nvidia-cudnn-cu12" and f.review is None
    assert f.evidence["package"] == CUDNN.format(version)
    assert f.evidence["range"] == ["vers:pypi/>=9.0.0|<9.1.0.70"]
    assert f.affected_text == "vers:pypi/>=9.0.0|<9.1.0.70"
    if status == "not_affected":
        assert f.justification == "vulnerable_code_not_present"


def test_pypi_names_are_pep_503_on_both_sides() -> None:
    entries = _osv([_pkg("PyPI", "NVIDIA_cudnn.CU12", {"introduced": "0"}, {"fixed": "9.1"})])
    (f,) = _match(entries, package_of("pkg:pypi/Nvidia_Cudnn-cu12@9.0.1"))
    assert f.status == "affected" and f.product == "PyPI/NVIDIA_cudnn.CU12"


def test_an_absent_package_gives_no_finding() -> None:
    assert _match(CUDNN_9, package_of("pkg:pypi/nvidia-cublas-cu12@12.4.5.8")) == []
    assert _match(CUDNN_9) == []
    # the same name in another ecosystem is another package
    assert _match(CUDNN_9, package_of("pkg:conda/nvidia-cudnn-cu12@9.0.0")) == []
    assert package_of("pkg:conda/nvidia-cudnn-cu12@9.0.0") is None


def test_one_finding_per_installed_version() -> None:
    found = _match(
        CUDNN_9,
        package_of(CUDNN.format("9.0.0.312")),
        package_of(CUDNN.format("9.1.0.70")),
    )
    assert sorted((f.installed, f.status) for f in found) == [
        ("9.0.0.312", "affected"),
        ("9.1.0.70", "fixed"),
    ]


def test_a_version_list_and_several_ranges() -> None:
    entries = _osv(
        [
            _pkg(
                "PyPI",
                "torch",
                {"introduced": "0"},
                {"fixed": "1.13.1"},
                {"introduced": "2.0.0"},
                {"fixed": "2.2.0"},
                versions=["1.9.0+cu111"],
            )
        ]
    )
    answers = {
        v: _match(entries, package_of(f"pkg:pypi/torch@{v}"))[0]
        for v in ("1.9.0+cu111", "1.13.1", "1.14", "2.1.2+cu121", "2.2.0")
    }
    assert {v: f.status for v, f in answers.items()} == {
        "1.9.0+cu111": "affected",
        "1.13.1": "fixed",
        "1.14": "fixed",  # between a fix and the flaw's return
        "2.1.2+cu121": "affected",
        "2.2.0": "fixed",
    }
    assert answers["2.1.2+cu121"].fixed_in == "2.2.0"
    assert answers["1.14"].fixed_in == "1.13.1"


def test_no_fix_listed_means_no_fixed_in() -> None:
    entries = _osv([_pkg("PyPI", "nvidia-cudnn-cu12", {"introduced": "9.0"})])
    (f,) = _match(entries, package_of(CUDNN.format("9.5.1.17")))
    assert f.status == "affected" and f.fixed_in is None


# -- never a silent pass ---------------------------------------------------------------------


def test_a_git_only_range_is_affected_for_review() -> None:
    entries = _osv(
        [
            {
                "package": {"ecosystem": "PyPI", "name": "nvidia-cudnn-cu12"},
                "ranges": [
                    {"type": "GIT", "repo": "https://e.com/r", "events": [{"introduced": "0"}]}
                ],
            }
        ]
    )
    (f,) = _match(entries, package_of(CUDNN.format("9.9.9")))
    assert f.status == "affected" and f.review and "GIT" in f.review


@pytest.mark.parametrize(
    ("installed", "why"),
    [
        ("9.x-weird build", "not a PEP 440 version"),
        (None, "the installed version is unknown"),
    ],
)
def test_an_uncomparable_installed_version_is_affected_for_review(
    installed: str | None, why: str
) -> None:
    pkg = InstalledPackage("pypi", "nvidia-cudnn-cu12", installed, "pkg:pypi/nvidia-cudnn-cu12")
    (f,) = _match(CUDNN_9, pkg)
    assert f.status == "affected" and f.review is not None and why in f.review


def test_an_unreadable_range_is_affected_for_review_unless_another_decides() -> None:
    _, entries = CUDNN_9
    broken = [
        type(entries[0])(**{**entries[0].__dict__, "vers": ("vers:pypi/>=1.0|>=2.0",)}),
    ]
    (f,) = match("CVE-2026-1111", broken, AssetFacts(packages=(package_of(CUDNN.format("3")),)))
    assert f.status == "affected" and f.review and "form no range" in f.review
    both = [
        type(entries[0])(
            **{**entries[0].__dict__, "vers": ("vers:pypi/>=1.0|>=2.0", "vers:pypi/<9.1.0.70")}
        )
    ]
    pkg = package_of(CUDNN.format("9.0.0.312"))
    (inside,) = match("CVE-2026-1111", both, AssetFacts(packages=(pkg,)))
    assert inside.status == "affected" and inside.review is None  # a readable range decides it
    pkg = package_of(CUDNN.format("9.1.0.70"))
    (after,) = match("CVE-2026-1111", both, AssetFacts(packages=(pkg,)))
    assert after.status == "affected" and after.review  # "fixed" only with every range read


def test_a_withdrawn_record_states_nothing() -> None:
    entries = _osv(
        [_pkg("PyPI", "nvidia-cudnn-cu12", {"introduced": "0"})], withdrawn="2026-03-01T00:00:00Z"
    )
    assert _match(entries, package_of(CUDNN.format("9.0.0"))) == []


# -- Debian: the source package, on its release ------------------------------------------------

DRIVER = _osv(
    [
        _pkg(
            "Debian:12",
            "nvidia-graphics-drivers",
            {"introduced": "0"},
            {"fixed": "535.274.02-1~deb12u1"},
        ),
        _pkg(
            "Debian:13",
            "nvidia-graphics-drivers",
            {"introduced": "0"},
            {"fixed": "550.163.01-3"},
        ),
    ]
)


def _libcuda(version: str, distro: str | None = "debian-12", **source: Any) -> InstalledPackage:
    q = f"?arch=amd64&distro={distro}" if distro else "?arch=amd64"
    found = package_of(f"pkg:deb/debian/libcuda1@{version.replace(':', '%3A')}{q}", **source)
    assert found is not None
    return found


def test_debian_statements_name_the_source_package() -> None:
    src = {"source_name": "nvidia-graphics-drivers"}
    (f,) = _match(DRIVER, _libcuda("535.261.03-1", **src), _libcuda("535.261.03-1", **src))
    assert f.status == "affected" and f.product == "Debian:12/nvidia-graphics-drivers"
    assert (
        f.fixed_in == "535.274.02-1~deb12u1" and f.evidence["source_package"] == src["source_name"]
    )
    (fixed,) = _match(DRIVER, _libcuda("535.274.02-1~deb12u1", **src))
    assert fixed.status == "fixed"
    # without its Source: the binary's own name, which names nothing here
    assert _match(DRIVER, _libcuda("535.261.03-1")) == []


def test_a_binnmu_is_judged_at_its_sources_version() -> None:
    pkg = _libcuda(
        "535.274.02-1~deb12u1+b1",
        source_name="nvidia-graphics-drivers",
        source_version="535.274.02-1~deb12u1",
    )
    (f,) = _match(DRIVER, pkg)
    assert (f.status, f.installed) == ("fixed", "535.274.02-1~deb12u1")
    assert f.evidence["compared_as"] == "535.274.02-1~deb12u1"
    assert f.evidence["version"] == "535.274.02-1~deb12u1+b1"


def test_syfts_upstream_qualifier_names_the_source() -> None:
    pkg = package_of(
        "pkg:deb/debian/libcuda1@535.261.03-1?arch=amd64&distro=debian-12"
        "&upstream=nvidia-graphics-drivers%40535.261.03-1"
    )
    assert pkg is not None and pkg.source_name == "nvidia-graphics-drivers"
    (f,) = _match(DRIVER, pkg)
    assert f.status == "affected"


def test_only_the_packages_release_is_judged() -> None:
    src = {"source_name": "nvidia-graphics-drivers"}
    # 550.54.14-1 is below Debian 13's fix; on Debian 12 only the Debian 12 statement counts
    (f12,) = _match(DRIVER, _libcuda("550.54.14-1", **src))
    assert f12.status == "fixed" and f12.product == "Debian:12/nvidia-graphics-drivers"
    (f13,) = _match(DRIVER, _libcuda("550.54.14-1", "debian-13", **src))
    assert f13.status == "affected" and f13.product == "Debian:13/nvidia-graphics-drivers"
    # a release no statement names: the advisory says nothing of it
    assert _match(DRIVER, _libcuda("470.256.02-1", "debian-11", **src)) == []
    # Ubuntu's packages are not Debian's, whatever their names
    ubuntu = package_of(
        "pkg:deb/ubuntu/libcuda1@535.261.03-0ubuntu1?distro=ubuntu-24.04",
        source_name="nvidia-graphics-drivers",
    )
    assert ubuntu is None


def test_an_unknown_release_is_judged_by_every_release_and_reviewed_when_they_differ() -> None:
    src = {"source_name": "nvidia-graphics-drivers"}
    (disagree,) = _match(DRIVER, _libcuda("550.54.14-1", None, **src))
    assert disagree.status == "affected" and disagree.review and "disagree" in disagree.review
    (agree,) = _match(DRIVER, _libcuda("560.35.03-1", None, **src))
    assert agree.status == "fixed" and agree.review is None
    (both,) = _match(DRIVER, _libcuda("470.256.02-1", None, **src))
    assert both.status == "affected" and both.review and "release is unknown" in both.review


# -- products that are packages ---------------------------------------------------------------


def test_the_container_toolkit_is_its_go_module() -> None:
    entries = _osv(
        [
            _pkg(
                "Go",
                "github.com/NVIDIA/nvidia-container-toolkit",
                {"introduced": "0"},
                {"fixed": "1.17.8"},
            )
        ]
    )
    ctk = Installed(key="container-toolkit", version="1.17.3", paths=("/usr/bin/nvidia-ctk",))
    (f,) = match(entries[0], entries[1], AssetFacts(products=(ctk,)))
    assert (f.status, f.fixed_in) == ("affected", "1.17.8")
    assert f.product == "Go/github.com/NVIDIA/nvidia-container-toolkit"
    assert f.evidence["product"] == "container-toolkit"
    assert f.evidence["paths"] == ["/usr/bin/nvidia-ctk"]
    new = Installed(key="container-toolkit", version="1.17.8")
    (g,) = match(entries[0], entries[1], AssetFacts(products=(new,)))
    assert g.status == "fixed"
    # a driver (pkg:generic) is no package of any ecosystem
    drv = Installed(key="driver", version="535.261.03", branch="R535")
    assert match(entries[0], entries[1], AssetFacts(products=(drv,))) == []


def test_bulletin_statements_never_reach_the_package_matcher() -> None:
    # a bulletin product status (no ecosystem) naming a package's name matches nothing
    _, entries = CUDNN_9
    bulletin = [type(entries[0])(**{**entries[0].__dict__, "ecosystem": None})]
    pkg = package_of(CUDNN.format("9.0.0"))
    assert match("CVE-2026-1111", bulletin, AssetFacts(packages=(pkg,))) == []


@settings(max_examples=200)
@given(
    st.lists(st.integers(0, 40), min_size=1, max_size=4),
    st.lists(st.integers(0, 40), min_size=1, max_size=4),
    st.lists(st.integers(0, 40), min_size=1, max_size=4),
)
def test_status_follows_the_interval(intro: list[int], fix: list[int], probe: list[int]) -> None:
    """Whatever the versions: affected exactly inside [introduced, fixed), fixed at or after the
    fix, not affected before the flaw."""
    lo, hi, at = (".".join(map(str, p)) for p in (intro, fix, probe))
    from packaging.version import Version

    if Version(lo) >= Version(hi):
        return
    entries = _osv([_pkg("PyPI", "nvidia-cudnn-cu12", {"introduced": lo}, {"fixed": hi})])
    (f,) = _match(entries, package_of(CUDNN.format(at)))
    v = Version(at)
    expected = "affected" if Version(lo) <= v < Version(hi) else "fixed"
    expected = "not_affected" if v < Version(lo) else expected
    assert f.status == expected and f.review is None


def test_a_configuration_that_switches_the_fix_off_reopens_an_osv_fixed() -> None:
    """CVE-2025-23359 (5616): allow-cuda-compat-libs-from-container switches the fix off again
    (data/matching.yaml fix_disabled_by), whoever states the fix."""
    doc = osv(aliases=["CVE-2025-23359"])
    doc["affected"] = [
        _pkg(
            "Go",
            "github.com/NVIDIA/nvidia-container-toolkit",
            {"introduced": "0"},
            {"fixed": "1.17.4"},
        )
    ]
    (vuln,) = read_osv(encode(doc)).vulnerabilities
    entries = [status_entry(s, "osv") for s in vuln.statuses]
    ctk = (Installed(key="container-toolkit", version="1.17.8"),)

    def status(fact: str | None) -> str:
        facts = {"cuda_compat_libs_from_container": fact} if fact else {}
        (f,) = match("CVE-2025-23359", entries, AssetFacts(products=ctk, facts=facts))
        return f.status

    assert status("false") == "fixed"
    assert status("true") == "affected"
    assert status(None) == "affected"  # undecided: named, never a pass
