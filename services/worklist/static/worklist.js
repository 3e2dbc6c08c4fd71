// A little behaviour on top of plain forms, which work without it:
// ask before rejecting, and disable buttons once a form is sent so a double click
// cannot send the same decision twice.
(function () {
  "use strict";
  document.addEventListener("click", function (event) {
    var button = event.target.closest("button[data-confirm]");
    if (button && !window.confirm(button.getAttribute("data-confirm"))) {
      event.preventDefault();
    }
  });
  document.addEventListener("submit", function (event) {
    var form = event.target;
    var submitter = event.submitter;
    if (submitter && submitter.name) {
      // Disabled buttons are not sent: carry the pressed button's value in a hidden field.
      var hidden = document.createElement("input");
      hidden.type = "hidden";
      hidden.name = submitter.name;
      hidden.value = submitter.value;
      form.appendChild(hidden);
    }
    window.setTimeout(function () {
      form.querySelectorAll("button").forEach(function (b) { b.disabled = true; });
      if (submitter) { submitter.textContent = "Working…"; }
    }, 0);
  });
})();

// The task page's live panel: the calls the task's run proposes, shown as they arrive (the
// run's stream, kept to proposals and the end by /tasks/{id}/live). Hidden until the first
// call; text only (textContent), never markup from the stream.
(function () {
  "use strict";
  var panel = document.getElementById("live-calls");
  if (!panel || !window.EventSource) { return; }
  var list = document.getElementById("live-calls-list");
  var source = new EventSource(panel.getAttribute("data-stream"));
  function read(msg) {
    try { return JSON.parse(msg.data); } catch (e) { return null; }
  }
  source.addEventListener("TOOL_CALL_PROPOSED", function (msg) {
    var ev = read(msg);
    if (!ev) { return; }
    var p = ev.payload || {};
    var li = document.createElement("li");
    li.setAttribute("data-id", String(ev.id));
    var name = document.createElement("code");
    name.textContent = String(p.name || "?");
    var args = document.createElement("pre");
    args.className = "answer";
    args.textContent = JSON.stringify(p.arguments || {}, null, 2);
    li.appendChild(name);
    li.appendChild(args);
    list.appendChild(li);
    panel.hidden = false;
  });
  source.addEventListener("ENDED", function () {
    source.close();  // the run is over: nothing more will be proposed
  });
})();
