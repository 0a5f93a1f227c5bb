"""A client's `messages` → the run's request and history (docs/openai-api.md, "History").

The last message is the request (it must be the user's); the ones before it open the run's
new conversation as its history: `system`/`developer` messages as system messages after the
agent's own instructions (they add to them, never replace them), `user` and `assistant` as
they are. Quiver runs the agent's tools itself, so client-side tools (`tools`, `functions`,
`tool` messages) are refused with a 400 rather than silently dropped.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.errors import Invalid
from app.llm.types import ChatMessage
from app.openai_api.schemas import MAX_TEXT, ChatCompletionRequest, MessageIn

_CLIENT_TOOLS = (
    "client-side tools are not supported: the agent's tools run inside Quiver "
    "(configure them on the agent)"
)


@dataclass(frozen=True)
class RunRequest:
    message: str
    history: list[ChatMessage]


def text_of(message: MessageIn, index: int) -> str:
    """The message's text: a string, or its text parts joined by newlines."""
    content = message.content
    if content is None:
        return ""
    if isinstance(content, str):
        text = content
    else:
        texts = []
        for j, part in enumerate(content):
            if part.type != "text" or part.text is None:
                raise Invalid(
                    f"messages[{index}].content[{j}]: only text parts are supported "
                    f"(got {part.type!r})",
                    param=f"messages[{index}].content",
                )
            texts.append(part.text)
        text = "\n".join(texts)
    if len(text) > MAX_TEXT:
        raise Invalid(
            f"messages[{index}].content: at most {MAX_TEXT} characters",
            param=f"messages[{index}].content",
        )
    return text


def run_request(body: ChatCompletionRequest) -> RunRequest:
    """What the run is asked (the last message) and what it knows already (the others)."""
    if body.n is not None and body.n != 1:
        raise Invalid("n: only one choice (n=1) is supported", param="n")
    if body.tools or body.functions:
        param = "tools" if body.tools else "functions"
        raise Invalid(f"{param}: {_CLIENT_TOOLS}", param=param)
    *earlier, last = body.messages
    where = len(body.messages) - 1
    if last.role != "user":
        raise Invalid(
            f"messages[{where}]: the last message must be the user's (it is the request; "
            f"got {last.role!r})",
            param="messages",
        )
    message = text_of(last, where)
    if not message.strip():
        raise Invalid(f"messages[{where}].content: must not be empty", param="messages")
    history: list[ChatMessage] = []
    for index, item in enumerate(earlier):
        if item.role in ("tool", "function"):
            raise Invalid(f"messages[{index}]: {_CLIENT_TOOLS}", param="messages")
        text = text_of(item, index)
        if item.role in ("system", "developer"):
            if text.strip():
                history.append(ChatMessage.system(text))
        elif item.role == "user":
            history.append(ChatMessage.user(text))
        elif text:  # an assistant turn; its client-side tool calls (if any) are not kept
            history.append(ChatMessage.assistant(text))
    return RunRequest(message=message, history=history)
