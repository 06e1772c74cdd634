"""DocsparseError: every failed call, whatever gRPC API raised it."""
from __future__ import annotations

from typing import Optional

import grpc

__all__ = ["DocsparseError"]


class DocsparseError(Exception):
    """A call the server (or the channel) answered with a status other than OK.

    `code` is the status code's name ("NOT_FOUND", "INVALID_ARGUMENT",
    "RESOURCE_EXHAUSTED", "DEADLINE_EXCEEDED", "UNAVAILABLE", ...) and
    `message` the server's message, which names the offending field or limit
    (proto/docsparse/v1/docsparse.proto lists when each code comes back).
    """

    def __init__(self, code: str, message: str,
                 grpc_code: Optional[grpc.StatusCode] = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.grpc_code = grpc_code if grpc_code is not None else getattr(grpc.StatusCode, code,
                                                                         None)

    def __reduce__(self):
        return (type(self), (self.code, self.message))

    @classmethod
    def from_rpc_error(cls, error: grpc.RpcError) -> "DocsparseError":
        # grpc.RpcError itself has no code(); the raised objects (a call or
        # grpc.aio.AioRpcError) do.
        code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
        details = error.details() if hasattr(error, "details") else str(error)
        return cls(code.name if code is not None else "UNKNOWN", details or "", code)
