"""An OpenAI-compatible HTTP server (standard library only): GET /v1/models, POST /v1/chat/completions and
/v1/completions (streamed as server-sent events with `"stream": true`), and GET / the chat page.

One model has one KV cache, so requests are served one at a time (a lock queues the others: their caches never mix);
a request that starts like the previous one reuses its cache. A client that disconnects mid-stream ends its
generation and frees the model for the next request. Every bad request gets a 4xx JSON error in OpenAI's shape, and
no request can stop the server."""
from __future__ import annotations
import json, threading, time, uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from fusegrad.llm.generate import Sampling

MAX_BODY = 1 << 22  # 4 MiB of JSON is far more than any prompt the context can hold

class RequestError(Exception):
  def __init__(self, status: int, message: str, param: str | None = None, kind: str = "invalid_request_error"):
    super().__init__(message)
    self.status, self.param, self.kind = status, param, kind

def _field(body: dict, name: str, types: tuple, default: Any = None, required: bool = False):
  if name not in body or body[name] is None:
    if required: raise RequestError(400, f"'{name}' is required", name)
    return default
  v = body[name]
  if not isinstance(v, types) or (isinstance(v, bool) and bool not in types):
    raise RequestError(400, f"'{name}' must be {' or '.join(t.__name__ for t in types)}, got {type(v).__name__}", name)
  return v

def sampling_from(body: dict) -> Sampling:
  stop = _field(body, "stop", (str, list), [])
  stop = [stop] if isinstance(stop, str) else stop
  if not all(isinstance(x, str) for x in stop): raise RequestError(400, "'stop' must be a string or a list of strings", "stop")
  max_tokens = _field(body, "max_completion_tokens", (int,), None) or _field(body, "max_tokens", (int,), 256)
  s = Sampling(float(_field(body, "temperature", (int, float), 1.0)), _field(body, "top_k", (int,), 0), float(_field(body, "top_p", (int, float), 1.0)),
               float(_field(body, "min_p", (int, float), 0.0)), float(_field(body, "repetition_penalty", (int, float), 1.0)),
               _field(body, "seed", (int,), None), max_tokens, stop)
  try: return s.check()
  except ValueError as e: raise RequestError(400, str(e), str(e).split()[0]) from None

def messages_from(body: dict) -> list[dict]:
  msgs = _field(body, "messages", (list,), required=True)
  if not msgs: raise RequestError(400, "'messages' must not be empty", "messages")
  out = []
  for i, m in enumerate(msgs):
    if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant", "developer"):
      raise RequestError(400, f"messages[{i}] must be an object with a role of system, user or assistant", "messages")
    content = m.get("content", "")
    if isinstance(content, list):  # OpenAI's content parts: only text is understood here
      if not all(isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str) for p in content):
        raise RequestError(400, f"messages[{i}].content: only text parts are supported", "messages")
      content = "".join(p["text"] for p in content)
    if not isinstance(content, str): raise RequestError(400, f"messages[{i}].content must be a string", "messages")
    out.append({"role": "system" if m["role"] == "developer" else m["role"], "content": content})
  return out

class Server(ThreadingHTTPServer):
  daemon_threads = True
  def __init__(self, chat, host: str, port: int):
    super().__init__((host, port), Handler)
    self.chat, self.lock = chat, threading.Lock()

class Handler(BaseHTTPRequestHandler):
  server: Server
  protocol_version = "HTTP/1.1"
  def log_message(self, fmt, *args): pass  # quiet: a chat server prints nothing per request

  # ---- responses
  def _send(self, status: int, body: bytes, ctype: str = "application/json"):
    self.send_response(status)
    self.send_header("Content-Type", ctype)
    self.send_header("Content-Length", str(len(body)))
    self.send_header("Access-Control-Allow-Origin", "*")
    self.end_headers()
    self.wfile.write(body)
  def _json(self, status: int, obj: dict): self._send(status, json.dumps(obj).encode())
  def _error(self, e: RequestError): self._json(e.status, {"error": {"message": str(e), "type": e.kind, "param": e.param, "code": None}})

  def do_OPTIONS(self):  # CORS preflight from a page served elsewhere
    self.send_response(204)
    for k, v in (("Access-Control-Allow-Origin", "*"), ("Access-Control-Allow-Methods", "GET, POST, OPTIONS"),
                 ("Access-Control-Allow-Headers", "Content-Type, Authorization"), ("Content-Length", "0")): self.send_header(k, v)
    self.end_headers()

  def do_GET(self):
    path = self.path.split("?")[0]
    if path in ("/", "/index.html"): return self._send(200, resources.files("fusegrad.llm").joinpath("chat.html").read_bytes(), "text/html; charset=utf-8")
    if path == "/v1/models": return self._json(200, {"object": "list", "data": [self._model_card()]})
    if path.startswith("/v1/models/"):
      if path[len("/v1/models/"):] == self.server.chat.name: return self._json(200, self._model_card())
      return self._error(RequestError(404, f"model '{path[len('/v1/models/'):]}' does not exist", "model", "not_found_error"))
    self._error(RequestError(404, f"no route GET {path}", kind="not_found_error"))

  def do_POST(self):
    path = self.path.split("?")[0]
    try:
      if path not in ("/v1/chat/completions", "/v1/completions"): raise RequestError(404, f"no route POST {path}", kind="not_found_error")
      body = self._body()
      model = _field(body, "model", (str,), self.server.chat.name)
      if model != self.server.chat.name: raise RequestError(404, f"model '{model}' does not exist (this server has '{self.server.chat.name}')", "model", "not_found_error")
      s, stream = sampling_from(body), _field(body, "stream", (bool,), False)
      tok = self.server.chat.tokenizer
      if path == "/v1/chat/completions":
        text, special = tok.apply_chat_template(messages_from(body), add_generation_prompt=True), False
      else:
        prompt = _field(body, "prompt", (str, list), required=True)
        if isinstance(prompt, list):
          if len(prompt) != 1 or not isinstance(prompt[0], str): raise RequestError(400, "'prompt' must be a string (or a list of one string)", "prompt")
          prompt = prompt[0]
        text, special = prompt, True
      ids = tok.encode(text, add_special_tokens=special)
      limit = self.server.chat.model.cfg.max_context
      if len(ids) >= limit: raise RequestError(400, f"the prompt is {len(ids)} tokens; this model's context holds {limit}", "messages")
    except RequestError as e: return self._error(e)
    self._complete(path == "/v1/chat/completions", ids, s, stream, bool(body.get("stream_options", {}) and body["stream_options"].get("include_usage")))

  def _body(self) -> dict:
    try: n = int(self.headers.get("Content-Length", ""))
    except ValueError: raise RequestError(411, "a Content-Length header is required") from None
    if not 0 <= n <= MAX_BODY: raise RequestError(413, f"the request body is {n} bytes; the limit is {MAX_BODY}")
    try: body = json.loads(self.rfile.read(n) or b"null")
    except (json.JSONDecodeError, UnicodeDecodeError) as e: raise RequestError(400, f"the body is not valid JSON: {e}") from None
    if not isinstance(body, dict): raise RequestError(400, "the body must be a JSON object")
    return body

  def _model_card(self) -> dict: return {"id": self.server.chat.name, "object": "model", "created": 0, "owned_by": "fusegrad"}

  # ---- generation
  def _complete(self, is_chat: bool, ids: list[int], s: Sampling, stream: bool, include_usage: bool):
    rid, created = ("chatcmpl-" if is_chat else "cmpl-") + uuid.uuid4().hex[:24], int(time.time())
    obj = "chat.completion" if is_chat else "text_completion"
    def choice(text: str, finish: str | None, delta: bool) -> dict:
      if not is_chat: return {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
      return {"index": 0, ("delta" if delta else "message"): ({"content": text} if delta else {"role": "assistant", "content": text}), "finish_reason": finish}
    with self.server.lock:  # one generation at a time: one KV cache
      n, parts = 0, []
      if stream:
        self.send_response(200)
        for k, v in (("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache"), ("Connection", "close"), ("Access-Control-Allow-Origin", "*")):
          self.send_header(k, v)
        self.end_headers()
        self.close_connection = True
      try:
        if stream and is_chat: self._event({"id": rid, "object": obj + ".chunk", "created": created, "model": self.server.chat.name,
                                            "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]})
        for piece, tok in self.server.chat.stream(ids, s):
          n += tok >= 0
          if stream: self._event({"id": rid, "object": obj + ".chunk" if is_chat else obj, "created": created, "model": self.server.chat.name,
                                  "choices": [choice(piece, None, True)]})
          else: parts.append(piece)
      except (BrokenPipeError, ConnectionResetError): return  # the client left: leaving the generator frees the model
      usage = {"prompt_tokens": len(ids), "completion_tokens": n, "total_tokens": len(ids) + n}
      finish = "length" if n >= s.max_tokens else "stop"
      try:
        if not stream: return self._json(200, {"id": rid, "object": obj, "created": created, "model": self.server.chat.name,
                                               "choices": [choice("".join(parts), finish, False)], "usage": usage})
        last = {"id": rid, "object": obj + ".chunk" if is_chat else obj, "created": created, "model": self.server.chat.name, "choices": [choice("", finish, True)]}
        self._event(last)
        if include_usage: self._event({**last, "choices": [], "usage": usage})
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
      except (BrokenPipeError, ConnectionResetError): return

  def _event(self, obj: dict):
    self.wfile.write(b"data: " + json.dumps(obj).encode() + b"\n\n")
    self.wfile.flush()

def serve(chat, host: str = "127.0.0.1", port: int = 8000) -> None:
  server = Server(chat, host, port)
  print(f"serving {chat.name} at http://{host}:{server.server_address[1]}/ (OpenAI API under /v1)", flush=True)
  try: server.serve_forever()
  except KeyboardInterrupt: pass
  finally: server.server_close()
