"""The fake's pagination, as GitHub pages a list: `per_page` (at most 100), `page`, and a Link
header naming the next page while there is one."""

from __future__ import annotations

from typing import Any, TypeVar
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import JSONResponse

T = TypeVar("T")


class Pages:
    """Mixed into the fake GitHub: one page of a list per request."""

    def _paginate(self, request: Request, items: list[T]) -> tuple[list[T], dict[str, str]]:
        """This request's page of `items`, and the Link header pointing to the next page."""
        per_page = min(int(request.query_params.get("per_page", 30)), 100)
        page = int(request.query_params.get("page", 1))
        headers = {}
        if page * per_page < len(items):
            query = {**request.query_params, "page": str(page + 1)}
            headers["link"] = f'<{request.url.replace(query=urlencode(query))}>; rel="next"'
        return items[(page - 1) * per_page : page * per_page], headers

    def _page(self, request: Request, items: list[dict[str, Any]], **headers: str) -> JSONResponse:
        chunk, link = self._paginate(request, items)
        return JSONResponse(chunk, headers={**headers, **link})
