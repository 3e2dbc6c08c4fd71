// The run page's live panel: the run's stream (/ui/stream/{run}, server-sent events) shown as
// it arrives. Text is appended delta by delta to its turn; tool calls, waits and the end get a
// line each; an attempt that supersedes another at the same slot (a retry, or the generation
// restarted after its executor crashed) is announced and the earlier text struck through.
// EventSource reconnects by itself with Last-Event-ID, so a dropped connection resumes where it
// stopped. Everything is written with textContent: nothing the stream carries becomes markup.
(function () {
  "use strict";
  var panel = document.getElementById("live");
  if (!panel || !window.EventSource) { return; }
  var list = document.getElementById("live-events");
  var state = document.getElementById("live-state");
  var over = panel.getAttribute("data-over") === "true";
  var KINDS = ["TURN_STARTED", "TEXT_DELTA", "TOOL_CALL_DELTA", "TOOL_CALL_PROPOSED",
    "TOOL_CALL_STARTED", "TOOL_CALL_FINISHED", "TOOL_CALL_REFUSED", "PARKED", "RESUMED",
    "ENDED", "PROGRESS"];
  var slots = {};  // "era/call_seq" -> {attempt, item, text, turn}
  var turns = 0;   // the run's turns in the order they began (a restarted one keeps its number)
  var ended = false;

  function say(text, cls) {
    state.textContent = text;
    state.className = "live-state" + (cls ? " state-" + cls : "");
  }

  function line(ev, text, cls) {
    var li = document.createElement("li");
    li.setAttribute("data-kind", ev.kind);
    li.setAttribute("data-id", String(ev.id));
    if (cls) { li.className = "ev-" + cls; }
    li.textContent = text;
    list.appendChild(li);
    list.scrollTop = list.scrollHeight;
    return li;
  }

  function json(value) {
    try { return JSON.stringify(value); } catch (e) { return String(value); }
  }

  // The slot's current attempt; a new attempt at a slot already seen is announced first.
  function slot(ev) {
    if (ev.call_seq < 0) { return null; }
    var key = ev.era + "/" + ev.call_seq;
    var seen = slots[key];
    if (seen && seen.attempt !== ev.attempt) {
      if (seen.item) { seen.item.classList.add("superseded"); }
      line(ev, "↻ call " + key + " restarted (attempt " + ev.attempt + "): what its earlier" +
        " attempt showed is superseded", "wait").classList.add("restart");
      seen = slots[key] = {attempt: ev.attempt, item: null, text: null, turn: seen.turn};
    }
    if (!seen) { seen = slots[key] = {attempt: ev.attempt, item: null, text: null, turn: 0}; }
    return seen;
  }

  function turn(ev, s, title) {
    if (!s.turn) { s.turn = ++turns; }
    var li = line(ev, "── turn " + s.turn + title, "");
    li.classList.add("turn");
    var text = document.createElement("span");
    text.className = "live-text";
    li.appendChild(text);
    s.item = li;
    s.text = text;
  }

  var show = {
    TURN_STARTED: function (ev, p, s) {
      turn(ev, s, " · " + (p.provider || "?") + "/" + (p.model || "?"));
    },
    TEXT_DELTA: function (ev, p, s) {
      if (!s) { return; }
      if (!s.text) { turn(ev, s, ""); }  // joined mid-generation
      s.text.appendChild(document.createTextNode(String(p.text || "")));
      list.scrollTop = list.scrollHeight;
    },
    TOOL_CALL_DELTA: function () {},  // said whole once proposed
    TOOL_CALL_PROPOSED: function (ev, p) {
      line(ev, "→ proposes " + p.name + "(" + json(p.arguments || {}) + ")", "");
    },
    TOOL_CALL_STARTED: function (ev, p, s) {
      if (s) { s.item = line(ev, "⚙ " + p.name + " …", "muted"); }
    },
    TOOL_CALL_FINISHED: function (ev, p, s) {
      var text = "⚙ " + p.name + (p.ok ? " ok" : " failed (" + (p.error || "?") + ")");
      if (s && s.item && s.item.getAttribute("data-kind") === "TOOL_CALL_STARTED") {
        s.item.textContent = text;
        s.item.setAttribute("data-kind", ev.kind);
        s.item.className = p.ok ? "ev-ok" : "ev-bad";
      } else {
        line(ev, text, p.ok ? "ok" : "bad");
      }
    },
    TOOL_CALL_REFUSED: function (ev, p) {
      line(ev, "✗ refused " + p.name + (p.reason ? ": " + p.reason : ""), "bad");
    },
    PARKED: function (ev, p) {
      line(ev, "⏸ parked" + (p.parked_on ? " on " + p.parked_on : "") +
        (p.task_id ? " (task " + p.task_id + ")" : ""), "wait");
    },
    RESUMED: function (ev) { line(ev, "▶ resumed", "ok"); },
    PROGRESS: function (ev, p) {
      line(ev, "· " + (p.message !== undefined ? String(p.message) : json(p)), "muted");
    },
    ENDED: function (ev, p) {
      var status = String(p.status || "ended");
      line(ev, "■ " + status, status === "completed" ? "ok" : "bad");
      ended = true;
      say("ended: " + status + " — reload for the journal", "ended");
    }
  };

  var source = new EventSource(panel.getAttribute("data-stream"));
  source.onopen = function () { if (!ended) { say("live", "live"); } };
  source.onerror = function () {
    if (ended || over) {
      // Over: what the stream retains has been shown; do not ask for it again and again.
      source.close();
      if (!ended) { say("over — the stream's retained events are shown", "ended"); }
      return;
    }
    if (source.readyState === EventSource.CLOSED) {
      // Refused (not signed in any more, streaming not configured): the browser gives up.
      say("not available — reload to try again", "retry");
      return;
    }
    say("reconnecting…", "retry");  // EventSource retries with Last-Event-ID by itself
  };
  KINDS.forEach(function (kind) {
    source.addEventListener(kind, function (msg) {
      var ev;
      try { ev = JSON.parse(msg.data); } catch (e) { return; }
      var fn = show[ev.kind];
      if (fn) { fn(ev, ev.payload || {}, slot(ev)); }
      if (ended) { source.close(); }
    });
  });
})();
