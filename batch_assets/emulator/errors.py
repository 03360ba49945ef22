"""The error a request handler raises; each wire format's routes render it in their own body shape."""

from __future__ import annotations


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        *,
        kind: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind
        self.param = param
        self.code = code


def not_found(what: str, object_id: str) -> ApiError:
    return ApiError(404, f"No {what} found with id '{object_id}'.")


def missing_parameter(param: str) -> ApiError:
    return ApiError(400, f"Missing required parameter: '{param}'.", param=param, code="missing_required_parameter")


def invalid_value(param: str, message: str) -> ApiError:
    return ApiError(400, message, param=param, code="invalid_value")
