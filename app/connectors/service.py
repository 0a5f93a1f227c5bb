from __future__ import annotations

import asyncio
import builtins
import uuid
from typing import Any

from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncSession

from app.audit.tombstones import RemembersDeleted
from app.connectors.backend import ConnectorBackend
from app.connectors.catalog import ACTIONS
from app.connectors.models import Connector, ConnectorAction
from app.connectors.openapi import ConnectorDraft, ImportFilters, parse_openapi
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
    ImportChanges,
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


_ACTION_FIELDS = tuple(ActionCreate.model_fields)
_BUILD_IN_THREAD = 100
"""Connectors with more actions are built and read back in a worker thread (10k: seconds)."""


def _build(data: ConnectorCreate) -> Connector:
    fields = data.model_dump(exclude={"actions", "auth_config"})
    return Connector(
        **fields,
        auth_config=data.auth_config.model_dump(exclude_none=True),
        # Same order as every later read (the relationship is ordered by name).
        actions=[ConnectorAction(**a.model_dump()) for a in sorted(data.actions, key=_by_name)],
    )


def _imported(connector: Connector, warnings: list[str], **extra: Any) -> ConnectorImported:
    """The import's answer (in a worker thread). The flushed actions go to `ACTIONS` first,
    with their legacy tool definitions: the first chat after the import reads and builds
    neither (app/connectors/catalog.py)."""
    ACTIONS.remember(connector)
    read = ConnectorRead.model_validate(connector).model_dump()
    return ConnectorImported.model_validate({**read, "warnings": warnings, **extra})


def _draft(data: ConnectorImport, *, name: str | None, base_url: str | None) -> ConnectorDraft:
    """Parse and convert the document, then apply the auth overrides (CPU-bound: a thread)."""
    filters = ImportFilters(
        include_tags=tuple(data.include_tags),
        include_paths=tuple(data.include_paths),
        include_operations=tuple(data.include_operations),
    )
    draft = parse_openapi(
        data.document,
        name=name,
        base_url=base_url,
        filters=filters,
        auth_type=data.auth_type,
        credential_keys=tuple(data.credentials or ()),
    )
    if data.auth_type is not None:
        draft.auth_type = data.auth_type
        draft.auth_config = {}
    if data.auth_config is not None:
        draft.auth_config = data.auth_config.model_dump(exclude_none=True)
    return draft


def _create_from(data: ConnectorImport) -> tuple[ConnectorCreate, list[str]]:
    draft = _draft(data, name=data.name, base_url=data.base_url)
    fields = {**draft.model_dump(exclude={"warnings"}), "credentials": data.credentials}
    return _validated(ConnectorCreate, fields), draft.warnings


def _validated(model: Any, fields: dict[str, Any]) -> Any:
    try:
        return model.model_validate(fields)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "document"
        raise Invalid(f"imported connector is not valid: {where}: {err['msg']}") from exc


def _actions_from(
    data: ConnectorImport, connector_name: str, base_url: str
) -> tuple[ConnectorDraft, list[ActionCreate]]:
    draft = _draft(data, name=connector_name, base_url=data.base_url or base_url)
    actions = [_validated(ActionCreate, a.model_dump()) for a in draft.actions]
    return draft, actions


class ConnectorService(RemembersDeleted, CrudService[Connector]):
    history_kind = "connector"
    repository = ConnectorRepository
    label = "connector"

    async def create(self, session: AsyncSession, data: ConnectorCreate) -> Connector:
        await self.ensure_name_free(session, data.name)
        if len(data.actions) > _BUILD_IN_THREAD:
            return await self.save(session, await asyncio.to_thread(_build, data))
        return await self.save(session, _build(data))

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
        """OpenAPI 3.x → a stored connector with its actions; a precise 422 when it cannot.

        Parsing and validation run in a worker thread: a large document (or a refused
        bomb) never blocks the event loop."""
        create, warnings = await asyncio.to_thread(_create_from, data)
        connector = await self.create(session, create)
        return await asyncio.to_thread(_imported, connector, warnings)

    async def resync_openapi(
        self, session: AsyncSession, id: uuid.UUID, data: ConnectorImport
    ) -> ConnectorImported:
        """Re-import a (newer) document into an existing connector: actions are added,
        updated in place or removed by name; credentials stay unless new ones are sent."""
        connector = await self.get(session, id)
        if data.name is not None and data.name != connector.name:
            await self.ensure_name_free(session, data.name, current=id)
        draft, actions = await asyncio.to_thread(
            _actions_from, data, data.name or connector.name, connector.base_url
        )
        self._resync_settings(connector, data, draft)
        changes = self._resync_actions(connector, actions)
        await self.save(session, connector)
        return await asyncio.to_thread(_imported, connector, draft.warnings, changes=changes)

    @staticmethod
    def _resync_settings(
        connector: Connector, data: ConnectorImport, draft: ConnectorDraft
    ) -> None:
        connector.name = draft.name
        if data.base_url is not None:
            connector.base_url = draft.base_url
        if data.auth_type is not None and data.auth_type != connector.auth_type:
            if data.auth_type != "none" and data.credentials is None:
                raise Invalid(f"credentials: changing auth_type to {data.auth_type!r} needs them")
            connector.auth_type = data.auth_type
            connector.credentials = None
        if data.auth_type is not None or data.auth_config is not None:
            connector.auth_config = draft.auth_config
        if data.credentials is not None:
            connector.credentials = data.credentials
        try:
            check_credentials(connector.auth_type, connector.credentials)
        except ValueError as exc:
            raise _invalid(exc) from exc

    @staticmethod
    def _resync_actions(
        connector: Connector, actions: builtins.list[ActionCreate]
    ) -> ImportChanges:
        current = {a.name: a for a in connector.actions}
        incoming = {a.name: a for a in actions}
        added, changed = [], []
        for name, new in incoming.items():
            old = current.get(name)
            values = new.model_dump()
            if old is None:
                connector.actions.append(ConnectorAction(**values))
                added.append(name)
            elif any(getattr(old, k) != values[k] for k in _ACTION_FIELDS):
                for key in _ACTION_FIELDS:
                    setattr(old, key, values[key])
                changed.append(name)
        removed = sorted(set(current) - set(incoming))
        for name in removed:
            connector.actions.remove(current[name])
        connector.actions.sort(key=lambda a: a.name)  # as every later read orders them
        unchanged = len(incoming) - len(added) - len(changed)
        return ImportChanges(
            added=sorted(added), changed=sorted(changed), removed=removed, unchanged=unchanged
        )

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
