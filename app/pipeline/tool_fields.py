"""What the tool rankers read from a tool: its fields as words.

Beyond the name, description and parameters the model sees, a tool may carry `SearchHints`
(app/tools/base.py): a connector action's HTTP method and path, its OpenAPI tags, and the
source (connector or MCP server) it belongs to. The method and path become words: the path's
resource names (`/v1/customers/{customer}/sources` -> customers sources), its parameters
(`{customer}`), and verbs for the method when the path does not name its own verb
(`POST /v1/customers` -> create add new; `DELETE …` -> delete remove). Descriptions are read as
plain text (HTML tags, Markdown links and code marks removed).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any

from app.retrieval.text import tokenize, words
from app.tools.base import ToolDef

_MAX_SCHEMA_DEPTH = 3
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_TAG = re.compile(r"<[^>]{0,200}>")
_MD_LINK = re.compile(r"\[([^\]]{0,200})\]\([^)]{0,400}\)")
_URL = re.compile(r"https?://\S+")
_ENTITY = re.compile(r"&[a-z]{2,6};|&#\d{1,5};")
_PARAM = re.compile(r"\{([^{}/]+)\}")
_VERSION = re.compile(r"^(?:v\d+(?:\.\d+)*|\d{4}-\d{2}-\d{2}|api)$", re.IGNORECASE)
_EXTENSION = re.compile(r"\.(?:json|xml|csv)$", re.IGNORECASE)

_COLLECTION_VERBS = {
    "GET": "list get show",
    "POST": "create add new",
    "PUT": "set update replace",
    "PATCH": "update edit change",
    "DELETE": "delete remove",
}
_ITEM_VERBS = {
    "GET": "get retrieve show",
    "POST": "update change",
    "PUT": "set update replace",
    "PATCH": "update edit change",
    "DELETE": "delete remove",
}
OWN_VERBS = frozenset(
    tokenize(
        "add archive approve assign attach cancel capture close complete confirm connect create"
        " delete deny detach disable dispatch enable end finalize get invite join kick leave"
        " list lock mark merge open pay post publish push refresh refund reject release remove"
        " rename replace request rerun reset restrict resume reverse revoke search send set"
        " share start stop sync test transfer unarchive uninstall unlock update upload verify"
        " void"
    )
)
"""A path that ends on one of these verbs says what it does; the method adds nothing."""

_SOURCE_CHARS = 160
"""Of a source's description, what every one of its tools carries."""
_PARAMETER_TOKENS = 80
"""Of a tool's parameter descriptions: enough to name what they are about."""

FIELD_NAMES = (
    "name",
    "route",
    "summary",
    "description",
    "parameters",
    "parameter descriptions",
    "tags",
    "source",
)


def plain(text: str) -> str:
    """Text without HTML tags, entities, Markdown links (their label stays), URLs, backticks."""
    if "<" in text:
        text = _TAG.sub(" ", text)
    if "&" in text:
        text = _ENTITY.sub(" ", text)
    if "](" in text:
        text = _MD_LINK.sub(r"\1", text)
    if "://" in text:
        text = _URL.sub(" ", text)
    return text.replace("`", " ")


def schema_texts(schema: Mapping[str, Any], depth: int = 0) -> Iterator[tuple[str, str]]:
    """(parameter name, description + enum values) for a JSON schema, nested properties too."""
    props = schema.get("properties")
    if not isinstance(props, Mapping) or depth >= _MAX_SCHEMA_DEPTH:
        return
    for pname, spec in props.items():
        if not isinstance(spec, Mapping):
            yield str(pname), ""
            continue
        desc = spec.get("description")
        enum = spec.get("enum")
        extra = " ".join(str(v) for v in enum[:20]) if isinstance(enum, list) else ""
        yield str(pname), f"{desc if isinstance(desc, str) else ''} {extra}"
        yield from schema_texts(spec, depth + 1)
        items = spec.get("items")
        if isinstance(items, Mapping):
            yield from schema_texts(items, depth + 1)


def schema_parameter_names(schema: Mapping[str, Any]) -> list[str]:
    """Every parameter name of a JSON schema, nested ones too."""
    return [name for name, _ in schema_texts(schema)]


@lru_cache(maxsize=8192)
def route_parts(path: str) -> tuple[tuple[str, ...], tuple[str, ...], bool]:
    """(resource segments, parameter names, whether the path ends on a parameter) of a path;
    versions (`v1`, `2010-04-01`) and extensions (`.json`) left out."""
    segments = [s for s in re.split(r"[/]+", _EXTENSION.sub("", path)) if s]
    resources: list[str] = []
    params: list[str] = []
    for segment in segments:
        found = _PARAM.findall(segment)
        if found:
            params.extend(found)
        elif not _VERSION.match(segment):
            resources.append(segment)
    last_is_param = bool(segments) and bool(_PARAM.fullmatch(segments[-1]))
    return tuple(resources), tuple(params), last_is_param


@lru_cache(maxsize=8192)
def route_text(method: str, path: str) -> str:
    """Method and path as words: resources, parameters, and the method's verbs unless the
    path ends on a verb of its own (`POST /invoices/{invoice}/void`, `/chat.postMessage`)."""
    resources, params, last_is_param = route_parts(path)
    tail = tokenize(resources[-1]) if resources else []
    verb = ""
    own_verb = not last_is_param and any(t in OWN_VERBS for t in tail[:1] + tail[-1:])
    if method and not own_verb:
        table = _ITEM_VERBS if last_is_param else _COLLECTION_VERBS
        verb = table.get(method.upper(), "")
    return " ".join([verb, *resources, *params]).strip()


@lru_cache(maxsize=1 << 16)
def tokens(text: str) -> tuple[str, ...]:
    """`tokenize` of a tool text, cached: catalogs repeat the same texts (a GitHub
    `owner` parameter's description appears on hundreds of operations)."""
    return tuple(tokenize(plain(text)))


def tool_fields(tool: ToolDef) -> tuple[tuple[str, ...], ...]:
    """Token lists in `FIELD_NAMES` order."""
    first, *rest = _SENTENCE_END.split(tool.description.strip(), maxsplit=1)
    params = list(schema_texts(tool.parameters))
    hints = tool.hints
    route: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    source: tuple[str, ...] = ()
    if hints is not None:
        route = tokens(route_text(hints.method, hints.path)) if hints.path else ()
        tags = tokens(" ".join(hints.tags))
        source = tokens(f"{hints.source} {hints.source_description[:_SOURCE_CHARS]}")
    described = [t for _, d in params for t in tokens(d)][:_PARAMETER_TOKENS]
    return (
        tokens(tool.name),
        route,
        tokens(first),
        tokens(rest[0]) if rest else (),
        tuple(t for p, _ in params for t in tokens(p)),
        tuple(described),
        tags,
        source,
    )


def tool_text(tool: ToolDef, description_chars: int = 400) -> str:
    """What is embedded for a tool: its name and route as words, description, parameters."""
    params = " ".join(schema_parameter_names(tool.parameters))
    name = " ".join(words(tool.name))
    hints = tool.hints
    route = route_text(hints.method, hints.path) if hints is not None and hints.path else ""
    description = plain(tool.description)[:description_chars]
    head = f"{name}. {route}" if route else name
    return f"{head}. {description} {params}".strip()
