/* The job page's "Log" box: while the job runs, fetch the tail from GET /api/jobs/{id}/log/ every few seconds
   and show it without reloading the page. A file, not an inline script: the Content-Security-Policy refuses those.
   The box stays scrolled to the bottom unless the reader scrolled up; when the job ends or starts another attempt,
   polling stops and the box says to reload (the page's status, failure and timeline change then). */
(function () {
  function start() {
    var box = document.getElementById("job-log");
    if (!box) { return; }
    var pre = document.getElementById("log-lines");
    var status = document.getElementById("log-status");
    if (!pre.hidden) { pre.scrollTop = pre.scrollHeight; }  // the newest lines first in view
    if (box.getAttribute("data-complete") === "true") { return; }
    var url = box.getAttribute("data-log-url");
    var attempt = Number(box.getAttribute("data-attempt"));
    var every = Number(box.getAttribute("data-refresh-seconds") || 5) * 1000;

    function atBottom() { return pre.scrollHeight - pre.scrollTop - pre.clientHeight < 8; }

    function show(data) {
      if (data.lines.length) {
        var follow = pre.hidden || atBottom();
        pre.textContent = data.lines.join("\n") + "\n";
        pre.hidden = false;
        if (follow) { pre.scrollTop = pre.scrollHeight; }
        status.textContent = box.getAttribute("data-running-text");
      }
      if (data.complete || data.attempt !== attempt) {
        status.textContent = box.getAttribute("data-moved-text");
        return false;
      }
      return true;
    }

    function refresh() {
      fetch(url, {credentials: "same-origin", headers: {"Accept": "application/json"}})
        .then(function (response) {
          if (!response.ok) { throw new Error(String(response.status)); }
          return response.json();
        })
        .then(function (data) { if (show(data)) { window.setTimeout(refresh, every); } })
        .catch(function () {
          status.textContent = box.getAttribute("data-error-text");
          window.setTimeout(refresh, every * 2);
        });
    }

    window.setTimeout(refresh, every);
  }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", start); } else { start(); }
})();
