"""Where a person reads an advisory: its bulletin pages and CVE records, as links built from
stored facts (the publisher's namespace, the tracking id, the document's source, the CVE id).

NVIDIA's CSAF documents carry no bulletin URL; every CVE Record NVIDIA publishes beside them
names the bulletin page as ``https://nvidia.custhelp.com/app/answers/detail/a_id/<tracking id>``
(e.g. 2023/5446/CVE-2023-0193.json), so that form is kept here as data, per publisher namespace.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

#: publisher namespace -> (bulletin page URL with ``{id}``, the tracking ids it applies to)
BULLETIN_PAGES: Mapping[str, tuple[str, re.Pattern[str]]] = {
    "https://www.nvidia.com/security": (
        "https://nvidia.custhelp.com/app/answers/detail/a_id/{id}",
        re.compile(r"\d{1,8}"),
    ),
}
_CVE = re.compile(r"CVE-\d{4}-\d{4,}")


def bulletin_page(namespace: str, tracking_id: str) -> str | None:
    """The publisher's page of a bulletin, where the publisher's form is known."""
    known = BULLETIN_PAGES.get(namespace)
    if known is None or not known[1].fullmatch(tracking_id):
        return None
    return known[0].format(id=tracking_id)


def advisory_links(cve: str, documents: Iterable[Mapping[str, Any]]) -> list[dict[str, str]]:
    """Links of one advisory: each bulletin's page and its document where fetched over HTTPS,
    then the CVE's records at NVD and cve.org (a CVE id only)."""
    out: list[dict[str, str]] = []
    for doc in documents:
        page = bulletin_page(doc["publisher"], doc["bulletin"])
        if page:
            out.append({"label": f"bulletin {doc['bulletin']}", "url": page})
        source = str(doc.get("source") or "")
        if source.startswith("https://"):
            out.append({"label": f"bulletin {doc['bulletin']} ({doc['format']})", "url": source})
    if _CVE.fullmatch(cve):
        out.append({"label": "NVD", "url": f"https://nvd.nist.gov/vuln/detail/{cve}"})
        out.append({"label": "CVE record", "url": f"https://www.cve.org/CVERecord?id={cve}"})
    return list({link["url"]: link for link in out}.values())
