// The NoETL execution view: filter the tables by step, refresh while the run is going.
// The page is complete without this script (iframes may disallow scripts).
(function () {
  "use strict";
  var input = document.getElementById("step-filter");
  if (input) {
    input.addEventListener("input", function () {
      var wanted = input.value.trim();
      var rows = document.querySelectorAll("tr[data-step]");
      for (var i = 0; i < rows.length; i++) {
        var step = rows[i].getAttribute("data-step") || "";
        rows[i].classList.toggle("hidden", wanted !== "" && step.indexOf(wanted) === -1);
      }
    });
  }
  var status = document.getElementById("run-status");
  if (status && status.getAttribute("data-running") === "true") {
    window.setTimeout(function () {
      if (!input || input.value === "") { window.location.reload(); }
    }, 5000);
  }
})();
