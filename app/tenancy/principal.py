"""The caller of a chat route: its API key, whether it is admin, and the optional end user."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Annotated, Protocol, TypeVar

from fastapi import Depends, Header

from app.apikeys.auth import require_chat
from app.apikeys.models import ApiKey
from app.errors import Invalid, NotFound

USER_HEADER = "X-Quiver-User"
MAX_USER_LENGTH = 256


class Owned(Protocol):
    """A conversation or run: created by a key, optionally for one end user."""

    @property
    def api_key_id(self) -> uuid.UUID | None: ...
    @property
    def user(self) -> str | None: ...


OwnedRow = TypeVar("OwnedRow", bound=Owned)


@dataclass(frozen=True, kw_only=True)
class Principal:
    key_id: uuid.UUID
    admin: bool
    user: str | None = None
    agent_ids: frozenset[str] | None = None
    """None = every agent."""
    rate_limit_per_minute: int | None = None

    @classmethod
    def of(cls, key: ApiKey, user: str | None = None) -> Principal:
        return cls(
            key_id=key.id,
            admin="admin" in key.scopes,
            user=user,
            agent_ids=None if key.agent_ids is None else frozenset(map(str, key.agent_ids)),
            rate_limit_per_minute=key.rate_limit_per_minute,
        )

    def with_user(self, user: str | None) -> Principal:
        """The principal for `POST /chat`: `user` from the body, else the header."""
        if user is not None and self.user is not None and user != self.user:
            raise Invalid(f"user: differs from the {USER_HEADER} header")
        if user is None:
            return self
        return Principal(
            key_id=self.key_id,
            admin=self.admin,
            user=user,
            agent_ids=self.agent_ids,
            rate_limit_per_minute=self.rate_limit_per_minute,
        )

    def may_use(self, agent_id: uuid.UUID) -> bool:
        return self.agent_ids is None or str(agent_id) in self.agent_ids

    def sees(self, row: Owned) -> bool:
        """Admin sees all; a chat key its own rows, and those of a user only with that user."""
        if self.admin:
            return True
        if row.api_key_id != self.key_id:
            return False
        return row.user is None or row.user == self.user

    def owned(self, row: OwnedRow | None, label: str, id: uuid.UUID) -> OwnedRow:
        """The row when the caller may see it; 404 for an unknown id and for someone else's
        alike, with the same message."""
        if row is None or not self.sees(row):
            raise NotFound(f"{label} {str(id)!r} not found")
        return row


def user_header(value: str | None) -> str | None:
    """The `X-Quiver-User` header's value: stripped, None when empty; 422 when too long."""
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    if len(value) > MAX_USER_LENGTH:
        raise Invalid(f"{USER_HEADER}: at most {MAX_USER_LENGTH} characters")
    return value


async def current_principal(
    key: Annotated[ApiKey, Depends(require_chat)],
    x_quiver_user: Annotated[
        str | None,
        Header(
            alias=USER_HEADER,
            description="The end user the request acts for (see `user` on POST /chat)",
        ),
    ] = None,
) -> Principal:
    return Principal.of(key, user_header(x_quiver_user))


PrincipalDep = Annotated[Principal, Depends(current_principal)]
