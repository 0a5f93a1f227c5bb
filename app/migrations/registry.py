"""Imports every domain's models so `Base.metadata` is complete (Alembic, mappers)."""

from app.agents import models as agents_models
from app.apikeys import models as apikeys_models
from app.approvals import models as approvals_models
from app.audit import models as audit_models
from app.chat import models as chat_models
from app.connectors import models as connectors_models
from app.conventions import models as conventions_models
from app.databases import models as databases_models
from app.db.base import Base
from app.knowledge import models as knowledge_models
from app.mcp import models as mcp_models
from app.oauth import models as oauth_models
from app.skills import models as skills_models
from app.tenancy import models as tenancy_models
from app.ui import models as ui_models

__all__ = [
    "Base",
    "agents_models",
    "apikeys_models",
    "approvals_models",
    "audit_models",
    "chat_models",
    "connectors_models",
    "conventions_models",
    "databases_models",
    "knowledge_models",
    "mcp_models",
    "oauth_models",
    "skills_models",
    "tenancy_models",
    "ui_models",
]
