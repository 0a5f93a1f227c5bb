"""Turn an MCP `CallToolResult` into the string observation the model reads."""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any

import mcp_types as types

from app.tools.base import ToolResult
from app.tools.truncate import truncate_for_model

MAX_CHARS = 8000


def render_call_result(
    result: types.CallToolResult, *, step: str | None = None, max_chars: int = MAX_CHARS
) -> ToolResult:
    """Text parts joined; structured content as JSON when no text mirrors it; binaries summarised.

    Servers returning structured content SHOULD also return it serialised in a text block
    (MCP spec), so structured content is only rendered when there is no text to read.
    """
    parts = [_render_block(block) for block in result.content]
    has_text = any(isinstance(block, types.TextContent) for block in result.content)
    if result.structured_content is not None and not has_text:
        parts.insert(0, json.dumps(result.structured_content, ensure_ascii=False, default=str))
    text = "\n".join(part for part in parts if part)
    if result.is_error:
        return ToolResult.fail(
            truncate_for_model(
                text or "the tool reported an error without detail", max_chars=max_chars
            ),
            step=step,
        )
    return ToolResult.success(
        truncate_for_model(text or "(no output)", max_chars=max_chars), step=step
    )


def _render_block(block: Any) -> str:
    match block:
        case types.TextContent():
            return block.text
        case types.ImageContent() | types.AudioContent():
            return f"[{block.mime_type}: {_decoded_size(block.data)} bytes]"
        case types.ResourceLink():
            return _resource_link(block)
        case types.EmbeddedResource():
            return _embedded(block.resource)
    return f"[unsupported content: {getattr(block, 'type', type(block).__name__)}]"


_LINK = re.compile(r"^\[resource link: (\S+?)(?= \(|, | - |\])(?: \(([^)\n]*)\))?", re.MULTILINE)


def resource_links(text: str) -> list[tuple[str, str]]:
    """The `(uri, name)` of the resource links a rendered result shows (see `_resource_link`):
    what the MCP endpoint lists as resources and hands back to its client as links."""
    return [(m.group(1), m.group(2) or m.group(1)) for m in _LINK.finditer(text)]


def _resource_link(link: types.ResourceLink) -> str:
    label = f"[resource link: {link.uri}"
    if link.name:
        label += f" ({link.name})"
    if link.mime_type:
        label += f", {link.mime_type}"
    if link.description:
        label += f" - {link.description}"
    return label + "]"


def _embedded(resource: types.TextResourceContents | types.BlobResourceContents) -> str:
    mime = resource.mime_type or "application/octet-stream"
    if isinstance(resource, types.TextResourceContents):
        return f"[resource {resource.uri} ({mime})]\n{resource.text}"
    return f"[resource {resource.uri}: {mime}, {_decoded_size(resource.blob)} bytes]"


def _decoded_size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return len(data)
