from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Query

MAX_LIMIT = 200
MAX_OFFSET = 2**31 - 1
"""Beyond any real table; keeps the value inside every store's integer range."""


@dataclass(frozen=True)
class PageParams:
    limit: int
    offset: int


async def _page_params(  # async: no worker-thread hop per list request
    limit: int = Query(50, ge=1, le=MAX_LIMIT), offset: int = Query(0, ge=0, le=MAX_OFFSET)
) -> PageParams:
    return PageParams(limit=limit, offset=offset)


PageDep = Annotated[PageParams, Depends(_page_params)]
