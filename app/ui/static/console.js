/* Quiver console: the playground and the run page's transcript.
 *
 * Chat is a POST that answers Server-Sent Events, so it is read with fetch and a small SSE
 * parser (EventSource only does GET). The browser calls the gateway's own chat routes
 * (/api/v1/chat, /api/v1/runs/{id}/events, /api/v1/runs/{id}/cancel) with the console's
 * session cookie and the session's CSRF token in the X-CSRF-Token header.
 */
(function () {
  "use strict";

  function csrfToken() {
    var meta = document.querySelector('meta[name="csrf-token"]');
    return meta ? meta.getAttribute("content") : "";
  }

  function apiHeaders(extra) {
    var headers = { "X-CSRF-Token": csrfToken() };
    for (var k in extra || {}) headers[k] = extra[k];
    return headers;
  }

  /* Calls onEvent(name, data, id) for each event of a text/event-stream response body. */
  async function readSse(response, onEvent) {
    var reader = response.body.getReader();
    var decoder = new TextDecoder();
    var buffer = "";
    var fields = {};
    for (;;) {
      var chunk = await reader.read();
      if (chunk.done) break;
      buffer += decoder.decode(chunk.value, { stream: true });
      var lines = buffer.split(/\r?\n/);
      buffer = lines.pop();
      for (var i = 0; i < lines.length; i++) {
        var line = lines[i];
        if (line === "") {
          if (fields.event) {
            var data = {};
            try { data = JSON.parse(fields.data || "{}"); } catch (e) { data = { raw: fields.data }; }
            onEvent(fields.event, data, fields.id ? parseInt(fields.id, 10) : null);
          }
          fields = {};
          continue;
        }
        if (line.charAt(0) === ":") continue;
        var at = line.indexOf(":");
        var key = at < 0 ? line : line.slice(0, at);
        var value = at < 0 ? "" : line.slice(at + 1).replace(/^ /, "");
        fields[key] = fields[key] && key === "data" ? fields[key] + "\n" + value : value;
      }
    }
  }

  function pretty(value) {
    if (typeof value === "string") {
      try { return JSON.stringify(JSON.parse(value), null, 2); } catch (e) { return value; }
    }
    return JSON.stringify(value, null, 2);
  }

  /* An answer as Markdown: parsed by marked, sanitised by DOMPurify (no script, no event
   * handler attributes survive); plain text when either library is missing. */
  function renderMarkdown(element, raw) {
    element.dataset.raw = raw;
    if (window.marked && window.DOMPurify) {
      var html = window.marked.parse(raw, { async: false, gfm: true });
      element.innerHTML = window.DOMPurify.sanitize(html, {
        USE_PROFILES: { html: true },
        FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select"],
        FORBID_ATTR: ["style"]
      });
      element.querySelectorAll("a[href]").forEach(function (a) {
        a.setAttribute("rel", "noopener noreferrer");
        a.setAttribute("target", "_blank");
      });
    } else {
      element.textContent = raw;
    }
  }

  /* Renders run events into the shared transcript markup (_transcript.html). */
  function Transcript(root, runIdOf) {
    this.root = root;
    this.log = root.querySelector("#chat-log");
    this.status = root.querySelector("#chat-status");
    this.steps = {};
    this.answer = null;
    this.lastId = 0;
    this.finished = false;
    this.runIdOf = runIdOf;
    this.approvals = {};
    this.resolved = {};
    this.delegations = {};
    this.replaying = false;
  }

  Transcript.prototype.clone = function (id) {
    var tpl = document.getElementById(id);
    return tpl.content.firstElementChild.cloneNode(true);
  };

  Transcript.prototype.user = function (text) {
    var li = this.clone("tpl-user");
    li.querySelector(".user-text").textContent = text;
    this.log.appendChild(li);
    this.answer = null;
  };

  Transcript.prototype.answerBox = function () {
    if (!this.answer) {
      var li = this.clone("tpl-answer");
      this.log.appendChild(li);
      this.answer = li.querySelector(".answer-text");
    }
    return this.answer;
  };

  Transcript.prototype.handle = function (name, data, id) {
    if (id !== null && id !== undefined) {
      if (id <= this.lastId) return; /* already shown (resumed stream) */
      this.lastId = id;
    }
    switch (name) {
      case "run_started":
        this.status.textContent = "Running with " + (data.tools || []).length + " tools…";
        break;
      case "model_delta": {
        var box = this.answerBox();
        renderMarkdown(box, (box.dataset.raw || "") + data.text);
        break;
      }
      case "message":
        renderMarkdown(this.answerBox(), data.content || "");
        break;
      case "tool_call": {
        var step = this.clone("tpl-step");
        step.dataset.callId = data.call_id;
        step.querySelector(".step-name").textContent = data.name;
        step.querySelector(".step-state").textContent = "running…";
        step.querySelector(".step-args").textContent = pretty(data.arguments);
        this.log.appendChild(step);
        this.steps[data.call_id] = step;
        this.answer = null;
        break;
      }
      case "tool_result": {
        var known = this.steps[data.call_id];
        if (!known) {
          this.handle("tool_call", { call_id: data.call_id, name: data.name, arguments: {} }, null);
          known = this.steps[data.call_id];
        }
        known.querySelector(".step-state").textContent =
          (data.ok ? "ok" : "error") + " · " + Math.round(data.duration_ms) + " ms";
        known.querySelector(".step-result").textContent = data.ok ? pretty(data.output) : (data.error || data.output);
        known.classList.add(data.ok ? "ok" : "failed");
        break;
      }
      case "tools_loaded":
        this.note("Loaded tools: " + (data.names || []).join(", "));
        break;
      case "approval_requested":
        this.approval(data);
        break;
      case "approval_resolved":
        this.resolve(data);
        break;
      case "delegation_started":
        this.delegation(data, false);
        break;
      case "delegation_finished":
        this.delegation(data, true);
        break;
      case "run_finished":
        this.finished = true;
        this.closeApprovals();
        this.status.textContent = "Run " + data.status + " after " + data.iterations + " iteration(s)" +
          (data.reason ? ": " + data.reason : "") + ".";
        this.root.dispatchEvent(new CustomEvent("run-ended", { detail: data }));
        break;
      case "run_failed":
        this.finished = true;
        this.closeApprovals();
        this.status.textContent = "Run failed: " + (data.error ? data.error.message : "error") + ".";
        this.root.dispatchEvent(new CustomEvent("run-ended", { detail: data }));
        break;
      default:
        break;
    }
  };

  Transcript.prototype.note = function (text) {
    var li = document.createElement("li");
    li.className = "note muted";
    li.textContent = text;
    this.log.appendChild(li);
  };

  /* An `approval_requested` event {approval_id, name, arguments, agent?, run_id?} shows
   * Approve/Deny and a reason field; each POSTs {decision, reason} to
   * /api/v1/runs/{run_id}/approvals/{approval_id}. `approval_resolved` (from here, the inbox,
   * the API or the timeout) turns the box into its outcome; a replayed run shows it decided. */
  Transcript.prototype.approval = function (data) {
    var li = this.clone("tpl-approval");
    li.dataset.approvalId = data.approval_id;
    var what = data.name || data.tool || "a tool call";
    li.querySelector(".approval-text").textContent =
      "Approval needed for " + what + (data.agent ? " (delegate " + data.agent + ")" : "") +
      (data.arguments ? " " + pretty(data.arguments) : "") +
      (data.reason ? " — " + data.reason : "");
    this.approvals[data.approval_id] = li;
    this.log.appendChild(li);
    var resolved = this.resolved[data.approval_id];
    if (resolved) {
      this.settle(li, resolved);
      return;
    }
    var runId = this.runIdOf();
    var buttons = li.querySelectorAll("button");
    var reason = li.querySelector(".approval-reason-input");
    var message = li.querySelector(".approval-message");
    buttons.forEach(function (button) {
      button.addEventListener("click", async function () {
        buttons.forEach(function (b) { b.disabled = true; });
        var url = "/api/v1/runs/" + encodeURIComponent(runId) + "/approvals/" +
          encodeURIComponent(data.approval_id);
        var body = { decision: button.dataset.decision };
        if (reason && reason.value.trim()) body.reason = reason.value.trim();
        var response = await fetch(url, {
          method: "POST",
          credentials: "same-origin",
          headers: apiHeaders({ "Content-Type": "application/json" }),
          body: JSON.stringify(body)
        });
        if (!li.classList.contains("decided")) {
          message.textContent = response.ok
            ? button.dataset.decision + " sent"
            : "not decided: " + (await errorText(response));
        }
      });
    });
    var first = li.querySelector("input, button");
    if (first && !this.replaying) first.focus();
  };

  /* Shows an approval's outcome in place of its buttons. */
  Transcript.prototype.settle = function (li, data) {
    li.classList.add("decided");
    var form = li.querySelector(".approval-form");
    if (form) form.remove();
    var outcome = li.querySelector(".approval-decision");
    outcome.hidden = false;
    var word = { approve: "approved", deny: "denied", timeout: "expired", cancelled: "cancelled" };
    outcome.textContent = (word[data.decision] || data.decision) +
      (data.by ? " by " + data.by : "") + (data.reason ? ": “" + data.reason + "”" : "");
    outcome.dataset.decision = data.decision;
  };

  Transcript.prototype.resolve = function (data) {
    this.resolved[data.approval_id] = data;
    var li = this.approvals[data.approval_id];
    if (li) this.settle(li, data);
  };

  /* A run that ended leaves no live buttons (its approvals can no longer be decided). */
  Transcript.prototype.closeApprovals = function () {
    for (var id in this.approvals) {
      var li = this.approvals[id];
      if (!li.classList.contains("decided")) this.settle(li, { decision: "cancelled", reason: "the run ended" });
    }
  };

  /* `delegation_started` / `delegation_finished`: a step linking the child run. */
  Transcript.prototype.delegation = function (data, finished) {
    var step = this.delegations[data.child_run_id];
    if (!step) {
      step = this.clone("tpl-delegation");
      var link = step.querySelector(".delegation-link");
      link.href = "/ui/runs/" + encodeURIComponent(data.child_run_id);
      link.textContent = "delegated to " + (data.agent || "an agent");
      this.log.appendChild(step);
      this.delegations[data.child_run_id] = step;
      this.answer = null;
    }
    step.querySelector(".delegation-state").textContent = finished
      ? data.status + (data.usage && data.usage.total_tokens ? " · " + data.usage.total_tokens + " tokens" : "")
      : "running…";
    step.dataset.status = finished ? data.status : "running";
  };

  async function errorText(response) {
    try {
      var body = await response.json();
      return body.detail || body.error || response.statusText;
    } catch (e) {
      return response.statusText || String(response.status);
    }
  }

  /* Replays a run's journal after `transcript.lastId`, then follows it live until it ends. */
  async function follow(runId, transcript) {
    for (var attempt = 0; attempt < 5 && !transcript.finished; attempt++) {
      try {
        var response = await fetch(
          "/api/v1/runs/" + encodeURIComponent(runId) + "/events?after=" + transcript.lastId,
          { credentials: "same-origin", headers: apiHeaders({ Accept: "text/event-stream" }) }
        );
        if (!response.ok) {
          transcript.status.textContent = "Cannot open the run: " + (await errorText(response));
          return;
        }
        await readSse(response, transcript.handle.bind(transcript));
      } catch (e) {
        await new Promise(function (r) { setTimeout(r, 500 * (attempt + 1)); });
      }
    }
  }

  async function cancel(runId, button, transcript) {
    button.disabled = true;
    var response = await fetch("/api/v1/runs/" + encodeURIComponent(runId) + "/cancel", {
      method: "POST",
      credentials: "same-origin",
      headers: apiHeaders({})
    });
    if (!response.ok) {
      transcript.status.textContent = "Cancel failed: " + (await errorText(response));
      button.disabled = false;
    } else {
      transcript.status.textContent = "Cancelling…";
    }
  }

  function setupPlayground(root) {
    var state = { runId: root.dataset.runId || "", conversationId: root.dataset.conversationId || "" };
    var transcript = new Transcript(root, function () { return state.runId; });
    var form = root.querySelector("#chat-form");
    var input = root.querySelector("#chat-input");
    var send = root.querySelector("#chat-send");
    var cancelButton = root.querySelector("#chat-cancel");
    var agent = root.querySelector("#chat-agent");

    function busy(running) {
      send.disabled = running;
      cancelButton.disabled = !running;
    }
    root.addEventListener("run-ended", function () {
      busy(false);
      input.focus();
    });
    cancelButton.addEventListener("click", function () { cancel(state.runId, cancelButton, transcript); });
    root.querySelector("#chat-new").addEventListener("click", function () {
      state.conversationId = "";
      state.runId = "";
      transcript.log.textContent = "";
      transcript.status.textContent = "New conversation.";
      history.replaceState(null, "", "/ui/playground");
      input.focus();
    });
    agent.addEventListener("change", function () { state.conversationId = ""; });

    form.addEventListener("submit", async function (event) {
      event.preventDefault();
      var message = input.value.trim();
      if (!message || !agent.value) return;
      busy(true);
      transcript.user(message);
      transcript.status.textContent = "Sending…";
      transcript.lastId = 0;
      transcript.finished = false;
      var body = { agent_id: agent.value, message: message };
      if (state.conversationId) body.conversation_id = state.conversationId;
      try {
        var response = await fetch("/api/v1/chat", {
          method: "POST",
          credentials: "same-origin",
          headers: apiHeaders({ "Content-Type": "application/json", Accept: "text/event-stream" }),
          body: JSON.stringify(body)
        });
        if (!response.ok) {
          transcript.status.textContent = "Not sent: " + (await errorText(response));
          busy(false);
          return;
        }
        state.runId = response.headers.get("X-Run-Id") || "";
        state.conversationId = response.headers.get("X-Conversation-Id") || state.conversationId;
        root.dataset.runId = state.runId;
        history.replaceState(null, "", "/ui/playground?run=" + encodeURIComponent(state.runId));
        input.value = "";
        await readSse(response, transcript.handle.bind(transcript));
      } catch (e) {
        /* the stream broke: resume from the journal below */
      }
      if (!transcript.finished && state.runId) await follow(state.runId, transcript);
      if (!transcript.finished) busy(false);
    });

    if (state.runId) {
      busy(root.dataset.running === "true");
      follow(state.runId, transcript);
    }
  }

  function setupRunPage(root) {
    var runId = root.dataset.runId;
    var transcript = new Transcript(root, function () { return runId; });
    var cancelButton = root.querySelector("#chat-cancel");
    if (cancelButton) {
      cancelButton.addEventListener("click", function () { cancel(runId, cancelButton, transcript); });
      root.addEventListener("run-ended", function () { cancelButton.disabled = true; });
    }
    follow(runId, transcript);
  }

  function init() {
    var playground = document.getElementById("playground");
    if (playground && !playground.dataset.ready) {
      playground.dataset.ready = "1";
      setupPlayground(playground);
    }
    var runView = document.getElementById("run-view");
    if (runView && !runView.dataset.ready) {
      runView.dataset.ready = "1";
      setupRunPage(runView);
    }
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
