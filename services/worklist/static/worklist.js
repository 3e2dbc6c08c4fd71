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
