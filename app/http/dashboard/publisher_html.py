"""Advisory text for pages: a publisher's notes (NVIDIA's carry raw HTML: ``<a>``, ``<ul>``,
``<div>``) are untrusted input (CSAF 2.0 §8), so what a page shows is the text run through an
allow-list sanitiser (nh3, the Python binding of the ammonia crate): a few structural and
inline tags stay, every other tag is dropped (its text kept, a script's or style's dropped
with it), links keep only ``href`` and ``title`` and only absolute ``https:``/``http:`` and
``mailto:`` targets, every link opens without a referrer or an opener.

The API returns the text as published; every other renderer escapes it.
"""

from __future__ import annotations

import nh3
from markupsafe import Markup

#: the tags a note may keep; anything else is removed, its text kept
TAGS = frozenset(
    {"a", "p", "div", "span", "br", "ul", "ol", "li", "strong", "b", "em", "i", "code", "pre"}
)
#: attributes per tag; no ``style``, ``class`` or event handler anywhere
ATTRIBUTES = {"a": {"href", "title"}}
#: link targets kept (a relative link would point into this dashboard)
SCHEMES = frozenset({"https", "http", "mailto"})
_ABSOLUTE = ("https://", "http://", "mailto:")
#: tags whose content goes with them (never shown as text)
DROPPED_WITH_CONTENT = frozenset({"script", "style"})


def _attribute(element: str, attribute: str, value: str) -> str | None:
    # nh3 keeps relative URLs; only absolute ones of the allowed schemes may stay
    if element == "a" and attribute == "href":
        return value if value.strip().lower().startswith(_ABSOLUTE) else None
    return value


def publisher_html(text: str | None) -> Markup:
    """``text`` as markup safe to put in a page (empty for None)."""
    if not text:
        return Markup("")
    cleaned = nh3.clean(
        text,
        tags=set(TAGS),
        clean_content_tags=set(DROPPED_WITH_CONTENT),
        attributes={k: set(v) for k, v in ATTRIBUTES.items()},
        attribute_filter=_attribute,
        url_schemes=set(SCHEMES),
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    )
    return Markup(cleaned)  # noqa: S704 - the sanitiser's output: only allow-listed markup
