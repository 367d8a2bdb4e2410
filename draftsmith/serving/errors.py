"""OpenAI-style error bodies, so clients (the `openai` package raises typed exceptions from them)
report the server's reason instead of a bare status code."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

ERROR_TYPES = {
    400: "invalid_request_error",
    404: "invalid_request_error",
    405: "invalid_request_error",
    429: "rate_limit_error",
    500: "server_error",
    503: "server_error",
}


class APIError(Exception):
    """An error answered as {"error": {"message", "type", "param", "code"}} with `status`."""

    def __init__(
        self,
        status: int,
        message: str,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
        refused: bool = True,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code
        self.headers = headers
        self.refused = refused  # False: the worker took the request and ended it (counted there)

    def body(self) -> dict[str, Any]:
        return error_body(self.status, self.message, self.param, self.code)


def error_body(status: int, message: str, param: str | None = None, code: str | None = None) -> dict:
    kind = ERROR_TYPES.get(status, "invalid_request_error" if status < 500 else "server_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def _validation_error(exc: RequestValidationError) -> APIError:
    """FastAPI's 422 becomes OpenAI's 400; malformed JSON gets its own message."""
    errors = exc.errors()
    first = errors[0] if errors else {}
    if first.get("type") == "json_invalid":
        detail = (first.get("ctx") or {}).get("error")
        message = f"malformed JSON body: {detail}" if detail else "malformed JSON body"
        return APIError(400, message, code="invalid_json")
    loc = [str(p) for p in first.get("loc", ()) if p != "body"]
    param = ".".join(loc) or None
    msg = str(first.get("msg", "invalid request")).removeprefix("Value error, ")
    if first.get("type") == "missing":
        msg = "field required"
    elif first.get("type") in ("model_attributes_type", "dict_type") and not loc:
        msg = "the body must be a JSON object"
    return APIError(400, f"{param}: {msg}" if param else msg, param=param, code="invalid_value")


def install_error_handlers(app: FastAPI, on_invalid: Any = None) -> None:
    """Every error the app can raise answers in OpenAI's shape; on_invalid() counts 4xx refusals."""

    def respond(err: APIError) -> JSONResponse:
        if on_invalid is not None and err.refused and 400 <= err.status < 500 and err.status != 429:
            on_invalid()
        return JSONResponse(err.body(), status_code=err.status, headers=err.headers)

    @app.exception_handler(APIError)
    async def _api_error(request: Request, exc: APIError) -> JSONResponse:
        return respond(exc)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return respond(_validation_error(exc))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse(
            error_body(exc.status_code, str(exc.detail)),
            status_code=exc.status_code,
            headers=getattr(exc, "headers", None),
        )

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception) -> JSONResponse:
        return JSONResponse(error_body(500, f"internal error: {type(exc).__name__}"), status_code=500)
