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
      case "model_delta":
        this.answerBox().textContent += data.text;
        break;
      case "message":
        this.answerBox().textContent = data.content;
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
      case "run_finished":
        this.finished = true;
        this.status.textContent = "Run " + data.status + " after " + data.iterations + " iteration(s)" +
          (data.reason ? ": " + data.reason : "") + ".";
        this.root.dispatchEvent(new CustomEvent("run-ended", { detail: data }));
        break;
      case "run_failed":
        this.finished = true;
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

  /* Approval hook: an `approval_requested` event {approval_id, name?, arguments?, reason?}
   * shows Approve/Deny; each POSTs {decision} to /api/v1/runs/{run_id}/approvals/{approval_id}. */
  Transcript.prototype.approval = function (data) {
    var li = this.clone("tpl-approval");
    var what = data.name || data.tool || "a tool call";
    li.querySelector(".approval-text").textContent =
      "Approval needed for " + what + (data.arguments ? " " + pretty(data.arguments) : "") +
      (data.reason ? " — " + data.reason : "");
    var runId = this.runIdOf();
    var buttons = li.querySelectorAll("button");
    buttons.forEach(function (button) {
      button.addEventListener("click", async function () {
        buttons.forEach(function (b) { b.disabled = true; });
        var url = "/api/v1/runs/" + encodeURIComponent(runId) + "/approvals/" +
          encodeURIComponent(data.approval_id);
        var response = await fetch(url, {
          method: "POST",
          credentials: "same-origin",
          headers: apiHeaders({ "Content-Type": "application/json" }),
          body: JSON.stringify({ decision: button.dataset.decision })
        });
        li.querySelector(".approval-text").textContent += response.ok
          ? " — " + button.dataset.decision + " sent"
          : " — failed (" + response.status + ")";
      });
    });
    this.log.appendChild(li);
    var first = li.querySelector("button");
    if (first) first.focus();
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
