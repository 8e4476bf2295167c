"""CycloneDX JSON schema validation of incoming reports.

jsonschema-rs (compiled; well under a millisecond for a 60-file report) decides. When it refuses
a document, the reference validator of cyclonedx-python-lib (jsonschema) re-checks it, names the
first problems with JSON pointers, and is the authority if the two disagree. The schemas are the
ones cyclonedx-python-lib ships; their references to the SPDX, JSF and cryptography schemas are
resolved from the same package, never from the network.
"""

from __future__ import annotations

import json
from functools import cache
from importlib.resources import files
from itertools import islice
from typing import TYPE_CHECKING, Any

import jsonschema_rs
from cyclonedx.schema import SchemaVersion

if TYPE_CHECKING:
    from cyclonedx.validation.json import JsonStrictValidator

SCHEMA_VERSIONS: dict[str, SchemaVersion] = {
    "1.4": SchemaVersion.V1_4,
    "1.5": SchemaVersion.V1_5,
    "1.6": SchemaVersion.V1_6,
    "1.7": SchemaVersion.V1_7,
}
_RESOURCES = "cyclonedx.schema._res"
_REFERENCED = frozenset(
    {
        "spdx.SNAPSHOT.schema.json",
        "jsf-0.82.SNAPSHOT.schema.json",
        "cryptography-defs.SNAPSHOT.schema.json",
    }
)


def _load(name: str) -> Any:
    return json.loads(files(_RESOURCES).joinpath(name).read_text(encoding="utf-8"))


def _local_reference(uri: str) -> Any:
    name = uri.rsplit("/", 1)[-1]
    if name not in _REFERENCED:
        raise ValueError(f"the CycloneDX schema refers to an unknown schema {uri}")
    return _load(name)


@cache
def _fast(spec: str) -> jsonschema_rs.Draft7Validator:
    schema = _load(f"bom-{spec}.SNAPSHOT.schema.json")
    return jsonschema_rs.Draft7Validator(schema, retriever=_local_reference)


@cache
def _reference(spec: str) -> JsonStrictValidator:
    # Imported on the first refused report only: jsonschema compiles its IRI grammar (lark) at
    # import, ~1.5 s of CPU that every worker would otherwise pay at start-up.
    from cyclonedx.validation.json import JsonStrictValidator

    return JsonStrictValidator(SCHEMA_VERSIONS[spec])


def _pointer(path: Any) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


def schema_problems(document: Any, text: str, spec: str, limit: int) -> list[tuple[str, str]]:
    """(JSON pointer, message) of the first ``limit`` schema violations; empty when valid."""
    fast = _fast(spec)
    if fast.is_valid(document):
        return []
    errors = _reference(spec).validate_str(text, all_errors=True)
    if errors is None:
        return []  # the reference validator accepts it: it is the authority
    problems = []
    for error in islice(errors, limit):
        detail = error.data
        message = str(getattr(detail, "message", detail))
        problems.append((_pointer(getattr(detail, "absolute_path", [])), message[:300]))
    if not problems:
        first = next(iter(fast.iter_errors(document)))
        problems.append((_pointer(first.instance_path), first.message[:300]))
    return problems
