"""The pygls 2.1 protocol, with the answers it leaves out (tests/lsp/test_protocol.py holds each fix
against the real server over stdio):

* A request whose params do not match the method's type gets a -32602 answer (pygls sends none).
* A frame whose body is not JSON gets a -32700 answer to its id when the id can be read
  (`transport`); bad headers and wrong Content-Length no longer leave the server deaf.
* What is no JSON-RPC message gets -32600 (pygls ignores it or answers -32603 with a traceback): a
  batch (one error, id null: LSP has no batches), a `method` that is not a string (its id), an `id`
  that is an object, array or boolean (id null). No answer carries a Python traceback in `data`.
* A frame over the size or depth limit gets -32600 to its id (`transport`).
* Requests after `shutdown` get -32600 (pygls drops them silently).
* `exit` without `shutdown` exits 1 (pygls exits 0).
* `workspace/executeCommand` runs the registered command as a cancellable task; the command checks
  its own arguments (-32602).
* Positions are always UTF-16 (what the query builder speaks; every client supports it).
"""

from __future__ import annotations

import logging
from typing import Any

from cattrs.errors import ClassValidationError
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams, JsonRpcInvalidRequest, JsonRpcParseError
from pygls.protocol import LanguageServerProtocol, lsp_method
from pygls.protocol.json_rpc import RPCRequest

from .. import foreground

log = logging.getLogger("soma_lsp.server")


class SomaProtocol(LanguageServerProtocol):
    """pygls' LSP protocol, with the answers it leaves out (module docstring)."""

    _server: Any  # the server (`app.SomaServer`): `stop(code)` ends it

    # -- messages in ------------------------------------------------------------------------------

    def handle_raw(self, data: Any) -> None:
        """A decoded JSON value from the transport: structure it, answer what cannot be."""
        invalid = _invalid_request(data)
        if invalid is not None:
            msg_id, text = invalid
            log.warning("%s (id %r): %.200r", text, msg_id, data)
            self._send_data({"jsonrpc": self.VERSION, "id": msg_id,
                             "error": {"code": JsonRpcInvalidRequest.CODE, "message": text}})
            return
        if data.get("jsonrpc") != self.VERSION:
            if "method" in data and "id" in data:
                self._answer_error(data["id"], JsonRpcInvalidRequest("Invalid Request: not a JSON-RPC 2.0 message"))
            else:
                log.warning("ignoring a message that is not JSON-RPC 2.0: %.200r", data)
            return
        if "id" in data and "method" in data:
            foreground.arrived()
        try:
            message = self.structure_message(data)
        except Exception as error:  # noqa: BLE001
            self._unstructurable(data, error)
            return
        self.handle_message(message)

    def _unstructurable(self, data: dict, error: Exception) -> None:
        msg_id, method = data.get("id"), data.get("method")
        detail = _describe(error)
        if method is not None and isinstance(msg_id, int | str):
            log.warning("invalid params for %s (id %r): %s", method, msg_id, detail)
            self._answer_error(msg_id, JsonRpcInvalidParams(f"Invalid params for {method}: {detail}"))
        elif method is None and isinstance(msg_id, int | str):
            # A response to one of our requests that does not match its type: fail that request.
            future = self._request_futures.pop(msg_id, None)
            log.warning("malformed response to request %r: %s", msg_id, detail)
            if future is not None and not future.done():
                future.set_exception(JsonRpcInvalidParams(f"malformed response: {detail}"))
        else:
            log.warning("invalid params for notification %s: %s", method, detail)

    def answer_unreadable(self, msg_id: int | str | None, text: str, *, refused: bool = False) -> None:
        """A frame the transport could not turn into a message: -32700 (not JSON), or -32600 for one
        `refused` over a size or depth limit when its id is known (with no id the bytes may not even
        be JSON: -32700)."""
        log.warning("unreadable message (id %r): %s", msg_id, text)
        code = JsonRpcInvalidRequest.CODE if refused and msg_id is not None else JsonRpcParseError.CODE
        self._send_data({"jsonrpc": self.VERSION, "id": msg_id, "error": {"code": code, "message": text}})

    def _send_response(self, msg_id: Any, result: Any = None, error: lsp.ResponseError | None = None) -> None:
        """Every answer leaves here: pygls puts a Python traceback in `data` of an internal error
        (-32603); it goes to the server log instead, never on the wire."""
        if error is not None and isinstance(error.data, dict) and "traceback" in error.data:
            log.error("internal error answering %r: %s\n%s", msg_id, error.message,
                      "".join(map(str, error.data["traceback"])))
            error = lsp.ResponseError(error.code, error.message)
        super()._send_response(msg_id, result, error)

    def _answer_error(self, msg_id: int | str, error: JsonRpcException) -> None:
        self._send_response(msg_id, error=error.to_response_error())

    def handle_message(self, message: Any) -> None:
        if self._shutdown and isinstance(message, RPCRequest) and message.method != lsp.EXIT:
            self._answer_error(message.id, JsonRpcInvalidRequest("Invalid Request: the server is shutting down"))
            return
        super().handle_message(message)

    # -- lifecycle ----------------------------------------------------------------------------------

    @lsp_method(lsp.INITIALIZE)
    def lsp_initialize(self, params: lsp.InitializeParams):
        general = params.capabilities.general
        offered = general.position_encodings if general is not None else None
        if general is not None:
            general.position_encodings = None  # → UTF-16, which every client must support
        try:
            result = yield from super().lsp_initialize(params)
        finally:
            if general is not None:
                general.position_encodings = offered
        return result

    @lsp_method(lsp.EXIT)
    def lsp_exit(self, *args: Any) -> None:
        code = 0 if self._shutdown else 1
        if code:
            log.warning("exit without shutdown: exiting with status 1")
        self._server.stop(code)

    @lsp_method(lsp.WORKSPACE_EXECUTE_COMMAND)
    async def lsp_workspace__execute_command(self, params: lsp.ExecuteCommandParams) -> Any:
        """Run the command a feature registered with `ls.command(name)`, as this request's own task.

        pygls' version runs the command as a sub-handler of a generator, so `$/cancelRequest`
        cancels only the wrapper and the command runs on; and it structures each argument from the
        handler's type hints, answering malformed arguments in its own words. Here a command is
        an async function of the raw argument list that checks it itself (-32602 saying what is
        wrong)."""
        handler = self.fm.commands.get(params.command)
        if handler is None:
            raise JsonRpcInvalidParams(f"unknown command {params.command!r}; soma-lsp runs "
                                       f"{', '.join(self.fm.commands)}")
        return await handler(params.arguments)


def _invalid_request(data: Any) -> tuple[None | int | str, str] | None:
    """(id to answer, message) when `data` is no JSON-RPC request, notification or response, per
    JSON-RPC 2.0 §5 (-32600, id null unless a valid id is known); None when its shape is right.
    A batch (an array) gets one error: LSP has no batches, so its elements are not answered."""
    if isinstance(data, list):
        return None, "Invalid Request: batch not supported (LSP sends one message per frame)"
    if not isinstance(data, dict):
        return None, "Invalid Request: a message must be a JSON object"
    msg_id = data.get("id")
    if msg_id is not None and (not isinstance(msg_id, int | str) or isinstance(msg_id, bool)):
        return None, "Invalid Request: id must be a number or a string"
    if "method" in data and not isinstance(data["method"], str):
        return msg_id, "Invalid Request: method must be a string"
    return None


def _describe(error: BaseException) -> str:
    """A readable reason for a structuring failure (cattrs' per-field messages when there are any)."""
    cause = error.__cause__ or error
    if isinstance(cause, ClassValidationError):
        try:
            from cattrs import transform_error

            return "; ".join(m.replace(" @ .", " @ ", 1) for m in transform_error(cause, path=""))
        except Exception:  # noqa: BLE001
            pass
    return str(cause) or type(cause).__name__
