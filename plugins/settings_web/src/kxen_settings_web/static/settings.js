// kxen Settings: live parts over server-sent events, actions as JSON POSTs.
// No framework: every part is rendered (and escaped) by the server; this file swaps them in,
// keeps focus, ticks and choices across a swap, and never puts a server's text into markup.
"use strict";

const csrf = document.querySelector('meta[name="kxen-csrf"]').content;
const flash = document.getElementById("flash");
const live = document.getElementById("live");

function say(message, bad) {
  flash.textContent = message;
  flash.dataset.kind = bad ? "bad" : "ok";
  flash.hidden = false;
}

async function post(path, body) {
  const response = await fetch(path, {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-Kxen-CSRF": csrf },
    body: JSON.stringify(body || {}),
  });
  let data = {};
  try {
    data = await response.json();
  } catch (_) {
    data = { error: response.statusText };
  }
  if (!response.ok) {
    const problems = Array.isArray(data.problems) && data.problems.length ? ": " + data.problems.join("; ") : "";
    throw new Error((data.error || "refused") + problems);
  }
  return data;
}

// --- live parts -------------------------------------------------------------------------------

function swap(id, html) {
  const part = document.getElementById(id);
  if (!part) return;
  const focused = document.activeElement;
  const focusKey = focused && part.contains(focused) ? focused.dataset.key : null;
  const kept = {};
  part.querySelectorAll("[data-key]").forEach((el) => {
    if (el.type === "checkbox") kept[el.dataset.key] = el.checked;
    else if (el.tagName === "SELECT") kept[el.dataset.key] = el.value;
  });
  const open = new Set();
  part.querySelectorAll("details[open]").forEach((d, i) => open.add(d.closest("[data-server]")?.dataset.server ?? i));
  part.innerHTML = html;
  part.querySelectorAll("[data-key]").forEach((el) => {
    if (!(el.dataset.key in kept)) return;
    if (el.type === "checkbox") el.checked = kept[el.dataset.key];
    else if (el.tagName === "SELECT" && [...el.options].some((o) => o.value === kept[el.dataset.key])) {
      el.value = kept[el.dataset.key];
    }
  });
  part.querySelectorAll("details").forEach((d, i) => {
    if (open.has(d.closest("[data-server]")?.dataset.server ?? i)) d.open = true;
  });
  if (focusKey) {
    const again = [...part.querySelectorAll("[data-key]")].find((el) => el.dataset.key === focusKey);
    if (again) again.focus();
  }
}

function connect() {
  const events = new EventSource("/events");
  events.addEventListener("open", () => {
    live.dataset.state = "live";
    live.textContent = "live";
  });
  events.addEventListener("render", (event) => {
    const parts = JSON.parse(event.data);
    for (const [id, html] of Object.entries(parts)) swap(id, html);
  });
  events.addEventListener("error", () => {
    live.dataset.state = "lost";
    live.textContent = "not connected: is kxen settings still running?";
  });
}

// --- actions ----------------------------------------------------------------------------------

function ticked() {
  return [...document.querySelectorAll('#remote input[name="ack"]:checked')].map((el) => el.value);
}

async function signIn(server) {
  // opened now, in the click, so no popup blocker stops it; pointed at the sign-in page below
  const tab = window.open("", "_blank");
  try {
    const data = await post("/api/servers/" + encodeURIComponent(server) + "/login");
    if (data.url && tab) {
      tab.opener = null;
      tab.location.href = data.url;
      say("Sign-in to " + server + " opened in a new tab: finish it there.");
    } else if (data.url) {
      say("Open the sign-in page of " + server + ": " + data.url);
    } else {
      if (tab) tab.close();
      say("Signing in to " + server + "…");
    }
  } catch (error) {
    if (tab) tab.close();
    throw error;
  }
}

const ACTIONS = {
  approve: (b) => post("/api/approvals/" + encodeURIComponent(b.dataset.id), { approved: true, remember: b.dataset.remember })
    .then(() => "Approved."),
  deny: (b) => post("/api/approvals/" + encodeURIComponent(b.dataset.id), { approved: false }).then(() => "Denied."),
  restart: (b) => post("/api/servers/" + encodeURIComponent(b.dataset.server) + "/restart")
    .then(() => "Restarting " + b.dataset.server + "…"),
  login: (b) => signIn(b.dataset.server).then(() => null),
  logout: (b) => post("/api/servers/" + encodeURIComponent(b.dataset.server) + "/logout")
    .then((d) => (d.removed ? "Signed out of " : "Nothing was stored for ") + b.dataset.server + "."),
  "cancel-login": (b) => post("/api/logins/" + encodeURIComponent(b.dataset.flow) + "/cancel").then(() => "Sign-in cancelled."),
  reload: () => post("/api/reload").then(() => "Configuration reloaded."),
  "remote-on": () => post("/api/remote", { enabled: true, acknowledge: ticked() }).then(() => "Remote MCP is on."),
  "remote-off": () => post("/api/remote", { enabled: false }).then(() => "Remote MCP is off."),
  acknowledge: () => post("/api/remote/acknowledge", { names: ticked() }).then(() => "Confirmed."),
  "accept-pin": (b) => post("/api/pins/" + encodeURIComponent(b.dataset.server) + "/accept", { tool: b.dataset.tool, digest: b.dataset.digest })
    .then(() => "Accepted " + b.dataset.tool + " of " + b.dataset.server + ": the model sees it again."),
};

document.addEventListener("click", async (event) => {
  const button = event.target.closest("button[data-action]");
  if (!button || button.disabled) return;
  const action = ACTIONS[button.dataset.action];
  if (!action) return;
  button.disabled = true;
  button.setAttribute("aria-busy", "true");
  try {
    const message = await action(button);
    if (message) say(message, false);
  } catch (error) {
    say(error.message, true);
  } finally {
    button.disabled = false;
    button.removeAttribute("aria-busy");
  }
});

document.getElementById("try").addEventListener("submit", async (event) => {
  event.preventDefault();
  const out = document.getElementById("try-result");
  const tool = document.getElementById("try-tool").value;
  let args;
  try {
    args = JSON.parse(document.getElementById("try-args").value || "{}");
  } catch (error) {
    say("The arguments are not valid JSON: " + error.message, true);
    return;
  }
  if (!tool) {
    say("No tool is listed yet.", true);
    return;
  }
  out.hidden = false;
  out.dataset.kind = "busy";
  out.textContent = "Calling " + tool + "…";
  try {
    const data = await post("/api/call", { tool: tool, arguments: args });
    out.dataset.kind = data.isError ? "bad" : "ok";
    out.textContent = data.text;
  } catch (error) {
    out.dataset.kind = "bad";
    out.textContent = error.message;
  }
});

connect();
