// SPDX-License-Identifier: MIT
// Renders one HTML file in headless Chromium through the DevTools protocol and prints, as JSON on stdout,
// what a reader of the page would see plus everything the browser complained about:
//   {"tables": [ids], "sections": [{"id", "class", "text"}], "headings": [text], "images": [{"id", "src_prefix",
//    "src_bytes", "width", "height", "complete"}], "console": [...], "exceptions": [...], "log": [...],
//    "requests": [urls that were not the page itself or data:],
//    "cjk": [{"text", "cjk_chars", "fonts": [{"familyName", "glyphCount"}]}] (elements with Chinese text)}
// Usage: node --experimental-websocket render_page.mjs CHROMIUM PAGE.html
// Node 20's WebSocket (behind --experimental-websocket) speaks the protocol; nothing from npm.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

const [chromiumPath, pagePath] = process.argv.slice(2);
if (!chromiumPath || !pagePath) {
  console.error("usage: render_page.mjs CHROMIUM PAGE.html");
  process.exit(2);
}
const pageUrl = pathToFileURL(resolve(pagePath)).href;
const profile = mkdtempSync(join(tmpdir(), "xthread-report-chromium-"));
const browser = spawn(chromiumPath, [
  "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
  "--no-default-browser-check", "--disable-extensions", "--remote-debugging-port=0",
  `--user-data-dir=${profile}`, "about:blank",
], { stdio: ["ignore", "ignore", "pipe"] });

let browserStderr = "";
function fail(message) {
  console.error(`render_page.mjs: ${message}`);
  if (browserStderr) console.error(browserStderr.split("\n").slice(-15).join("\n"));
  cleanup();
  process.exit(1);
}
function cleanup() {
  try { browser.kill("SIGKILL"); } catch {}
  try { rmSync(profile, { recursive: true, force: true }); } catch {}
}
const deadline = setTimeout(() => fail("timed out after 60 s"), 60000);

const wsUrl = await new Promise((resolveUrl) => {
  browser.stderr.setEncoding("utf8");
  browser.stderr.on("data", (chunk) => {
    browserStderr += chunk;
    const m = browserStderr.match(/DevTools listening on (ws:\/\/\S+)/);
    if (m) resolveUrl(m[1]);
  });
  browser.on("exit", (code) => fail(`chromium exited (${code}) before DevTools was listening`));
});

const ws = new WebSocket(wsUrl);
await new Promise((ok, bad) => { ws.onopen = ok; ws.onerror = () => bad(new Error("websocket error")); })
  .catch((e) => fail(e.message));
let nextId = 1;
const pending = new Map();
const events = [];
const waiters = [];
ws.onmessage = (message) => {
  const msg = JSON.parse(message.data);
  if (msg.id && pending.has(msg.id)) {
    const { ok, bad } = pending.get(msg.id);
    pending.delete(msg.id);
    if (msg.error) bad(new Error(JSON.stringify(msg.error)));
    else ok(msg.result);
    return;
  }
  if (msg.method) {
    events.push(msg);
    for (const w of waiters.splice(0)) w();
  }
};
function send(method, params = {}, sessionId) {
  const id = nextId++;
  ws.send(JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) }));
  return new Promise((ok, bad) => pending.set(id, { ok, bad }));
}
async function waitFor(predicate) {
  for (;;) {
    const found = events.find(predicate);
    if (found) return found;
    await new Promise((r) => waiters.push(r));
  }
}

// Every rendered element whose own text has CJK characters (the studies' Chinese titles), with the platform fonts
// Chromium drew its text with: [{"text", "cjk_chars", "fonts": [{"familyName", "glyphCount", ...}]}].
async function cjkFonts(sessionId) {
  const { result } = await send("Runtime.evaluate", {
    returnByValue: true,
    expression: `(() => {
      const cjk = /[\\u2e80-\\u9fff\\uf900-\\ufaff\\uff00-\\uffef]/g;
      const found = [];
      const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
      for (let n = walker.nextNode(); n; n = walker.nextNode()) {
        const parent = n.parentElement;
        // Only text the reader sees: a closed <details> renders nothing (and draws with no font).
        if (!parent || !parent.checkVisibility({ contentVisibilityAuto: true }) || !cjk.test(n.data)) continue;
        cjk.lastIndex = 0;
        if (!parent.hasAttribute("data-cjk")) {
          parent.setAttribute("data-cjk", String(found.length));
          found.push({ text: "", cjk_chars: 0 });
        }
        const entry = found[Number(parent.getAttribute("data-cjk"))];
        entry.text += n.data;
        entry.cjk_chars += (n.data.match(cjk) || []).length;
      }
      return JSON.stringify(found);
    })()`,
  }, sessionId);
  const found = JSON.parse(result.value);
  if (found.length === 0) return [];
  await send("DOM.enable", {}, sessionId);
  await send("CSS.enable", {}, sessionId);
  const { root } = await send("DOM.getDocument", { depth: 0 }, sessionId);
  for (let i = 0; i < found.length; ++i) {
    const { nodeId } = await send("DOM.querySelector", { nodeId: root.nodeId, selector: `[data-cjk="${i}"]` },
                                  sessionId);
    const { fonts } = await send("CSS.getPlatformFontsForNode", { nodeId }, sessionId);
    found[i].text = found[i].text.trim().slice(0, 80);
    found[i].fonts = fonts;
  }
  return found;
}

try {
  const { targetId } = await send("Target.createTarget", { url: "about:blank" });
  const { sessionId } = await send("Target.attachToTarget", { targetId, flatten: true });
  for (const domain of ["Page", "Runtime", "Log", "Network"]) await send(`${domain}.enable`, {}, sessionId);
  await send("Page.navigate", { url: pageUrl }, sessionId);
  await waitFor((e) => e.method === "Page.loadEventFired" && e.sessionId === sessionId);
  const { result } = await send("Runtime.evaluate", {
    returnByValue: true,
    expression: `JSON.stringify({
      tables: [...document.querySelectorAll("table")].map((t) => t.id),
      sections: [...document.querySelectorAll("section")].map((s) => ({id: s.id, class: s.className,
        text: s.innerText.slice(0, 400)})),
      headings: [...document.querySelectorAll("h1,h2,h3")].map((h) => h.textContent.trim()),
      banner: (document.getElementById("run-kind") || {}).textContent || null,
      images: [...document.images].map((i) => ({id: i.id, src_prefix: i.src.slice(0, 22),
        src_bytes: i.src.length, width: i.naturalWidth, height: i.naturalHeight, complete: i.complete})),
      scripts: document.scripts.length,
      links: [...document.querySelectorAll("link[href]")].map((l) => l.href),
    })`,
  }, sessionId);
  const page = JSON.parse(result.value);
  page.cjk = await cjkFonts(sessionId);
  const pick = (method) => events.filter((e) => e.method === method && e.sessionId === sessionId);
  page.console = pick("Runtime.consoleAPICalled").map((e) => ({
    type: e.params.type, text: e.params.args.map((a) => a.value ?? a.description ?? "").join(" ") }));
  page.exceptions = pick("Runtime.exceptionThrown").map((e) =>
    e.params.exceptionDetails.exception?.description ?? e.params.exceptionDetails.text);
  page.log = pick("Log.entryAdded").map((e) => ({ level: e.params.entry.level, text: e.params.entry.text,
    url: e.params.entry.url ?? "" }));
  page.requests = pick("Network.requestWillBeSent").map((e) => e.params.request.url)
    .filter((u) => u !== pageUrl && !u.startsWith("data:"));
  process.stdout.write(JSON.stringify(page, null, 1) + "\n");
} catch (e) {
  fail(e.stack || String(e));
}
clearTimeout(deadline);
ws.close();
cleanup();
process.exit(0);
