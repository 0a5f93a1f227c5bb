"""Route dependencies on the chat parts of the app's runtime (see `app/kit/state.py`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends

from app.chat.hub import RunHub
from app.chat.runner import RunManager
from app.kit.state import runtime_part
from app.pipeline.sources.backends import Backends

RunManagerDep = Annotated[RunManager, Depends(runtime_part("runs"))]
RunHubDep = Annotated[RunHub, Depends(runtime_part("hub"))]
BackendsDep = Annotated[Backends, Depends(runtime_part("backends"))]
