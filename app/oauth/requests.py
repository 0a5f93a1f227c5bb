"""Authlib's request objects built from a Starlette request (query, form, JSON body)."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

from authlib.oauth2.rfc6749 import JsonPayload, JsonRequest, OAuth2Payload, OAuth2Request
from starlette.datastructures import Headers

if TYPE_CHECKING:
    from app.agents.models import Agent


class _Payload(OAuth2Payload):  # type: ignore[misc]
    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        self._datalist: dict[str, list[str]] = defaultdict(list)
        for key, value in pairs:
            self._datalist[key].append(value)
        self._data = {key: values[0] for key, values in self._datalist.items()}

    @property
    def data(self) -> dict[str, str]:
        return self._data

    @property
    def datalist(self) -> dict[str, list[str]]:
        return self._datalist


class FormRequest(OAuth2Request):  # type: ignore[misc]
    """A request to the authorization, token or revocation endpoint (query and form)."""

    def __init__(
        self,
        method: str,
        uri: str,
        headers: Headers,
        query: list[tuple[str, str]],
        form: list[tuple[str, str]],
    ) -> None:
        super().__init__(method, uri, headers=headers)
        self._args = dict(query)
        self._form = dict(form)
        self.payload = _Payload(query + form)
        self.agent: Agent | None = None
        self.resource: str | None = None

    @property
    def args(self) -> dict[str, str]:
        return self._args

    @property
    def form(self) -> dict[str, str]:
        return self._form


class _Json(JsonPayload):  # type: ignore[misc]
    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    @property
    def data(self) -> dict[str, Any]:
        return self._data


class RegistrationRequest(JsonRequest):  # type: ignore[misc]
    def __init__(self, uri: str, headers: Headers, body: object) -> None:
        super().__init__("POST", uri, headers)
        self.payload = _Json(body if isinstance(body, dict) else {})
