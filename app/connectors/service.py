from __future__ import annotations

import builtins
import uuid

from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncSession

from app.connectors.backend import ConnectorBackend
from app.connectors.models import Connector, ConnectorAction
from app.connectors.openapi import parse_openapi
from app.connectors.repository import ConnectorActionRepository, ConnectorRepository
from app.connectors.schemas import (
    ActionCreate,
    ActionTestRequest,
    ActionUpdate,
    ConnectorCreate,
    ConnectorImport,
    ConnectorImported,
    ConnectorRead,
    ConnectorSummary,
    ConnectorUpdate,
    check_credentials,
    check_parameters_schema,
)
from app.errors import Conflict, Invalid, NotFound
from app.kit.crud import CrudService
from app.kit.schemas import ToolCallResult
from app.tools.base import CallContext
from app.tools.timing import timed_tool_call


def _by_name(action: ActionCreate) -> str:
    return action.name


def _invalid(exc: ValueError) -> Invalid:
    return Invalid(str(exc))


class ConnectorService(CrudService[Connector]):
    repository = ConnectorRepository
    label = "connector"

    async def create(self, session: AsyncSession, data: ConnectorCreate) -> Connector:
        await self.ensure_name_free(session, data.name)
        fields = data.model_dump(exclude={"actions", "auth_config"})
        connector = Connector(
            **fields,
            auth_config=data.auth_config.model_dump(exclude_none=True),
            # Same order as every later read (the relationship is ordered by name).
            actions=[ConnectorAction(**a.model_dump()) for a in sorted(data.actions, key=_by_name)],
        )
        return await self.save(session, connector)

    async def update(
        self, session: AsyncSession, id: uuid.UUID, data: ConnectorUpdate
    ) -> Connector:
        connector = await self.get(session, id)
        if data.name is not None:
            await self.ensure_name_free(session, data.name, current=id)
        changed = self.apply(connector, data, skip=frozenset({"auth_config"}))
        if data.auth_config is not None:
            connector.auth_config = data.auth_config.model_dump(exclude_none=True)
        if connector.auth_type == "none":
            if "credentials" in changed and connector.credentials:
                raise Invalid("credentials: auth_type 'none' takes no credentials")
            connector.credentials = None
        elif "auth_type" in changed and "credentials" not in changed:
            raise Invalid(f"credentials: changing auth_type to {connector.auth_type!r} needs them")
        try:
            check_credentials(connector.auth_type, connector.credentials)
        except ValueError as exc:
            raise _invalid(exc) from exc
        return await self.save(session, connector)

    async def list(  # type: ignore[override]
        self, session: AsyncSession, *, limit: int, offset: int
    ) -> tuple[builtins.list[ConnectorSummary], int]:
        """Lists stay small: each connector with `action_count`, not its actions."""
        rows, total = await ConnectorRepository(session).page_with_action_counts(
            limit=limit, offset=offset
        )
        return [ConnectorSummary.of(c, n) for c, n in rows], total

    # --- actions (sub-resource) ---

    async def list_actions(
        self, session: AsyncSession, id: uuid.UUID, *, limit: int, offset: int
    ) -> tuple[builtins.list[ConnectorAction], int]:
        if await ConnectorRepository(session).get_by(id=id) is None:
            raise NotFound(f"{self.label} {str(id)!r} not found")
        return await ConnectorActionRepository(session).page_of(id, limit=limit, offset=offset)

    def find_action(self, connector: Connector, name: str) -> ConnectorAction:
        for action in connector.actions:
            if action.name == name:
                return action
        known = ", ".join(a.name for a in connector.actions) or "none"
        raise NotFound(f"action {name!r} not found in connector {connector.name!r}; known: {known}")

    async def add_action(
        self, session: AsyncSession, id: uuid.UUID, data: ActionCreate
    ) -> ConnectorAction:
        connector = await self.get(session, id)
        if any(a.name == data.name for a in connector.actions):
            raise Conflict(f"connector {connector.name!r} already has an action {data.name!r}")
        action = ConnectorAction(**data.model_dump())
        connector.actions.append(action)
        await self.save(session, connector)
        return action

    async def update_action(
        self, session: AsyncSession, id: uuid.UUID, name: str, data: ActionUpdate
    ) -> ConnectorAction:
        connector = await self.get(session, id)
        action = self.find_action(connector, name)
        renamed = data.name is not None and data.name != name
        if renamed and any(a.name == data.name for a in connector.actions):
            raise Conflict(f"connector {connector.name!r} already has an action {data.name!r}")
        self.apply(action, data)
        try:
            ActionCreate.model_validate({k: getattr(action, k) for k in ActionCreate.model_fields})
            check_parameters_schema(action.parameters, action.path)
        except ValidationError as exc:
            err = exc.errors()[0]
            raise Invalid(f"{'.'.join(map(str, err['loc'])) or 'action'}: {err['msg']}") from exc
        except ValueError as exc:
            raise _invalid(exc) from exc
        await self.save(session, connector)
        return action

    async def import_openapi(
        self, session: AsyncSession, data: ConnectorImport
    ) -> ConnectorImported:
        """OpenAPI 3.x → a stored connector with its actions; a precise 422 when it cannot."""
        draft = parse_openapi(data.document, name=data.name, base_url=data.base_url)
        try:
            create = ConnectorCreate.model_validate(
                {**draft.model_dump(exclude={"warnings"}), "credentials": data.credentials}
            )
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"]) or "document"
            raise Invalid(f"imported connector is not valid: {where}: {err['msg']}") from exc
        connector = await self.create(session, create)
        read = ConnectorRead.model_validate(connector).model_dump()
        return ConnectorImported.model_validate({**read, "warnings": draft.warnings})

    async def test_action(
        self,
        session: AsyncSession,
        id: uuid.UUID,
        name: str,
        data: ActionTestRequest,
        executor: ConnectorBackend,
    ) -> ToolCallResult:
        """Run one action exactly as the model's `connector execute` would."""
        connector = await self.get(session, id)
        action = self.find_action(connector, name)
        call = executor.execute(connector, action, data.parameters, CallContext())
        return await timed_tool_call(call)

    async def delete_action(self, session: AsyncSession, id: uuid.UUID, name: str) -> None:
        connector = await self.get(session, id)
        connector.actions.remove(self.find_action(connector, name))
        await session.flush()


connector_service = ConnectorService()
