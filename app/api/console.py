"""GET /console: the admin console, served from the package's own static files (same origin as the API, no CDN).
The files hold no data and no secret, so they are served without a key; the page calls the JSON API with the key
the admin signs in with, as `Authorization: Bearer`."""

import mimetypes
from typing import Annotated

from fastapi import APIRouter, Path, Request
from fastapi.responses import FileResponse, RedirectResponse, Response

from app.console import STATIC_DIR
from app.errors import NotFound

router = APIRouter(include_in_schema=False)

# Only the files shipped with the package are ever served (the path is a key of this table, never joined onto a
# directory), so no request can reach outside it.
FILES = {path.relative_to(STATIC_DIR).as_posix(): path for path in sorted(STATIC_DIR.rglob("*")) if path.is_file()}
MEDIA_TYPES = {".js": "text/javascript", ".css": "text/css", ".html": "text/html", ".svg": "image/svg+xml"}
HEADERS = {
    # Scripts, styles and connections from this origin only: nothing inline, nothing fetched from elsewhere.
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",  # revalidate, so that an upgraded service serves its own console at once
}


@router.get("/console")
async def console_root(request: Request) -> Response:
    """The console lives under /console/ so that its relative links resolve (also behind a path prefix)."""
    return RedirectResponse(f"{request.scope.get('root_path', '')}/console/", status_code=308)


@router.api_route("/console/{path:path}", methods=["GET", "HEAD"])
async def console_file(path: Annotated[str, Path()]) -> Response:
    """One of the console's static files; the HTML shell for /console/."""
    file = FILES.get(path or "index.html")
    if file is None:
        raise NotFound(f"the console has no file '{path}'")
    media_type = MEDIA_TYPES.get(file.suffix) or mimetypes.guess_type(file.name)[0] or "application/octet-stream"
    return FileResponse(file, media_type=media_type, headers=HEADERS)
