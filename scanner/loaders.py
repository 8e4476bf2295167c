"""The one reader of every YAML and JSON document the product parses, with one set of limits.

Policies, trust policies, catalogs, reports, gate requests, token requests, signature envelopes
and bundles, CDI specs and the shipped data tables all come through here, so each is refused the
same way when it is hostile: past `MAX_YAML_BYTES`, nested deeper than `MAX_DEPTH`, an integer
of more than `MAX_INT_DIGITS` digits, a YAML document whose aliases expand past `MAX_NODES`
nodes or refer to themselves, a key given twice in one mapping (a signature, a reviewer or
another reader may read the other value), a number that is no finite float. Every refusal is a
`DocumentError` saying why; no other exception leaves (no ``RecursionError``, no ``ValueError``
of ``int()``'s digit limit).
"""

from __future__ import annotations

import codecs
import json
import math
from functools import cache
from typing import TYPE_CHECKING, Any

from scanner.errors import ScannerError

if TYPE_CHECKING:
    import yaml

#: the largest YAML document read (a CDI spec is a node file of at most 4 MiB; the service's
#: policy bodies are capped lower by their transport)
MAX_YAML_BYTES = 4 * 1024 * 1024
#: levels of nested mappings and lists (JSON objects and arrays) below the top one
MAX_DEPTH = 64
#: the longest integer read, in digits (int() refuses more than 4,300; nothing we read needs 100)
MAX_INT_DIGITS = 100
_MAX_INT_BITS = math.ceil(MAX_INT_DIGITS * math.log2(10))
#: YAML nodes after expanding aliases (a "billion laughs" document is a few hundred bytes)
MAX_NODES = 1_000_000


class DocumentError(ScannerError, ValueError):
    """A document that is not acceptable YAML or JSON; the message says why and where."""


# ------------------------------------------------------------------------------------ JSON


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DocumentError(f"duplicate key {key[:100]!r} in a JSON object")
            seen.add(key)
    return obj


def _integer(literal: str) -> int:
    digits = len(literal.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise DocumentError(
            f"malformed JSON: an integer of {digits} digits is out of range "
            f"(at most {MAX_INT_DIGITS})"
        )
    return int(literal)


def _float(literal: str) -> float:
    number = float(literal)
    if not math.isfinite(number):
        raise DocumentError(f"malformed JSON: the number {literal[:40]} is out of range")
    return number


def _constant(name: str) -> Any:
    raise DocumentError(f"malformed JSON: {name} is not a JSON number")


def text_of(data: bytes | str) -> str:
    """``data`` as text: UTF-8 (RFC 8259 §8.1; a byte order mark is ignored), never a guess at
    UTF-16/32; raises `DocumentError`."""
    if isinstance(data, str):
        return data
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DocumentError(f"not UTF-8: {e.reason} at byte {e.start}") from None


def check_depth(document: Any, max_depth: int = MAX_DEPTH) -> None:
    """Refuse lists and mappings nested more than ``max_depth`` levels below the top one."""
    # breadth-first over containers only: no recursion, whatever the depth
    level: list[Any] = [document] if isinstance(document, dict | list) else []
    depth = 0
    while level:
        depth += 1
        if depth > max_depth + 1:  # +1: the top-level container itself
            raise DocumentError(f"nesting deeper than {max_depth} levels")
        children: list[Any] = []
        for node in level:
            values = node.values() if isinstance(node, dict) else node
            children += [v for v in values if isinstance(v, dict | list)]
        level = children


def load_json(data: bytes | str, *, max_depth: int = MAX_DEPTH) -> Any:
    """Parse JSON strictly: UTF-8, each key once per object, integers of at most
    `MAX_INT_DIGITS` digits, finite numbers only, at most ``max_depth`` levels; raises
    `DocumentError` naming what is wrong."""
    text = text_of(data)
    try:
        document = json.loads(
            text,
            object_pairs_hook=_object,
            parse_int=_integer,
            parse_float=_float,
            parse_constant=_constant,
        )
    except json.JSONDecodeError as e:
        raise DocumentError(
            f"malformed JSON: {e.msg} at line {e.lineno} column {e.colno}"
        ) from None
    except RecursionError:
        raise DocumentError(f"nesting deeper than {max_depth} levels") from None
    check_depth(document, max_depth)
    return document


# ------------------------------------------------------------------------------------ YAML


def _one_line(error: Exception) -> str:
    return " ".join(str(error).split())


#: longest source line quoted under a YAML error (a minified document is one long line)
MAX_QUOTED_LINE = 160


def _yaml_message(error: Exception, text: str) -> str:
    """A YAML syntax error as a reader wants it: where (line and column, from 1), what, and the
    line itself with a caret under the place, on lines of their own. PyYAML's own text names
    ``"<unicode string>"`` twice and, collapsed onto one line, lost the excerpt."""
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None)
    if mark is None or not problem:
        return _one_line(error)
    message = f"line {mark.line + 1}, column {mark.column + 1}: {problem}"
    context = getattr(error, "context", None)
    if context:
        where = getattr(error, "context_mark", None)
        at = f" at line {where.line + 1}, column {where.column + 1}" if where is not None else ""
        message += f" ({context}{at})"
    lines = text.splitlines()
    if mark.line < len(lines) and len(lines[mark.line]) <= MAX_QUOTED_LINE:
        message += f"\n{lines[mark.line]}\n{' ' * mark.column}^"
    return message


def _check_events(text: str, loader: type[yaml.SafeLoader]) -> None:
    """Refuse, from the event stream alone (before anything is built or recursed into), a
    document nested deeper than `MAX_DEPTH`, one whose aliases expand past `MAX_NODES` nodes,
    and an alias to a node that contains it (a recursive structure)."""
    import yaml

    # each open collection: (its anchor, its nodes so far with aliases expanded)
    stack: list[tuple[str | None, list[int]]] = [(None, [0])]
    weights: dict[str, int] = {}  # anchor -> nodes of its node, aliases expanded
    expanded = 0
    collection = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
    end = (yaml.MappingEndEvent, yaml.SequenceEndEvent)
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, collection):
            if len(stack) > MAX_DEPTH + 1:
                raise DocumentError(f"nesting deeper than {MAX_DEPTH} levels{_at(event)}")
            stack.append((event.anchor, [1]))
            expanded += 1
        elif isinstance(event, end):
            anchor, count = stack.pop()
            stack[-1][1][0] += count[0]
            if anchor is not None:
                weights[anchor] = count[0]
        elif isinstance(event, yaml.ScalarEvent):
            stack[-1][1][0] += 1
            expanded += 1
            if event.anchor is not None:
                weights[event.anchor] = 1
        elif isinstance(event, yaml.AliasEvent):
            if any(anchor == event.anchor for anchor, _ in stack):
                raise DocumentError(
                    f"alias *{event.anchor} refers to a node that contains it{_at(event)}"
                )
            weight = weights.get(event.anchor or "", 1)  # an unknown one: the composer says so
            stack[-1][1][0] += weight
            expanded += weight
        else:
            continue
        if expanded > MAX_NODES:
            raise DocumentError(
                f"more than {MAX_NODES} nodes once its aliases are expanded{_at(event)}"
            )


def _at(where: yaml.Event | yaml.Node) -> str:
    mark = where.start_mark
    return "" if mark is None else f" (line {mark.line + 1}, column {mark.column + 1})"


@cache
def _loader() -> type[yaml.SafeLoader]:
    import yaml

    # libyaml's parser when PyYAML was built with it (~10x faster); the constructor is Python's
    base: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class StrictLoader(base):  # type: ignore[valid-type,misc]
        """The safe loader, refusing long integers and keys given twice in one mapping."""

        def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
            text = str(node.value).replace("_", "").lstrip("+-")
            if len(text) > MAX_INT_DIGITS:
                raise DocumentError(
                    f"an integer of {len(text)} digits is out of range "
                    f"(at most {MAX_INT_DIGITS}){_at(node)}"
                )
            value: int = super().construct_yaml_int(node)
            # another base (0x, 0o, 0b, base 60) names a larger number in as many characters
            if value.bit_length() > _MAX_INT_BITS:
                raise DocumentError(f"an integer out of range{_at(node)}")
            return value

        def flatten_mapping(self, node: yaml.MappingNode) -> None:
            # Every mapping comes here before a merge (<<) rewrites its pairs, so its own keys
            # are checked as written, once; keys a merge brings in may be overridden.
            checked: set[int] = self.__dict__.setdefault("_gpuprov_checked", set())
            if id(node) not in checked:
                checked.add(id(node))
                seen: set[Any] = set()
                for key_node, _ in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge":
                        continue
                    key = self.construct_object(key_node, deep=True)
                    try:
                        duplicate = key in seen
                        seen.add(key)
                    except TypeError:
                        continue  # unhashable: the constructor refuses it
                    if duplicate:
                        raise DocumentError(f"duplicate key {str(key)[:100]!r}{_at(key_node)}")
            super().flatten_mapping(node)

    StrictLoader.add_constructor("tag:yaml.org,2002:int", StrictLoader.construct_yaml_int)
    return StrictLoader


def load_yaml(data: bytes | str) -> Any:
    """Parse one YAML document (JSON is YAML) safely and strictly: at most `MAX_YAML_BYTES`,
    `MAX_DEPTH` levels, `MAX_NODES` nodes with aliases expanded, no alias to a node containing
    it, integers of at most `MAX_INT_DIGITS` digits, each key once per mapping; raises
    `DocumentError` naming what is wrong and where."""
    import yaml

    size = len(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)
    if size > MAX_YAML_BYTES:
        raise DocumentError(f"larger than {MAX_YAML_BYTES} bytes")
    text = text_of(data)
    loader = _loader()
    try:
        _check_events(text, loader)
        return yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader
    except DocumentError:
        raise
    except yaml.YAMLError as e:
        raise DocumentError(_yaml_message(e, text)) from None
    # ValueError: a timestamp that is no date, a base-60 number that is none; RecursionError,
    # OverflowError: in case a constructor still meets what the event check let through
    except (ValueError, RecursionError, OverflowError) as e:
        raise DocumentError(f"not valid YAML: {_one_line(e)}") from None
