/* Parts of a page that refresh in place while jobs change, without reloading the page: a file, not an inline
   script (the Content-Security-Policy refuses those).

   - An element with data-live-url (the job list's table) is refilled with what that address answers (the same
     query as the page: its filters, order, columns and page) every data-live-seconds.
   - An element with data-live-version (the job page) asks its address with ?since=<version>: 204 when nothing
     changed; otherwise the page itself, from which every element marked data-live-region replaces the one with
     the same id here, and the version is read anew. The log box keeps its own refresh (job_log.js).

   Nothing is asked while the tab is hidden (document.visibilityState): polling stops and starts again, at once,
   when the tab is shown. A region the reader is typing or choosing in is left alone until the next turn. */
(function () {
  "use strict";

  function busy(region) {
    var active = document.activeElement;
    return active && region.contains(active) && /^(INPUT|SELECT|TEXTAREA)$/.test(active.tagName);
  }

  function poll(region, ask) {
    function every() { return Number(region.getAttribute("data-live-seconds") || 10) * 1000; }
    var timer = null;
    var stopped = false;

    function schedule(delay) {
      window.clearTimeout(timer);
      if (!stopped) { timer = window.setTimeout(turn, delay); }
    }

    function turn() {
      if (document.visibilityState !== "visible") { return; }  // resumed by visibilitychange
      if (busy(region)) { schedule(every()); return; }
      ask().then(function (more) {
        if (more === false) { stopped = true; return; }
        schedule(every());
      }).catch(function () { schedule(every() * 2); });
    }

    document.addEventListener("visibilitychange", function () {
      if (document.visibilityState === "visible") { schedule(0); } else { window.clearTimeout(timer); }
    });
    schedule(every());
  }

  function get(url) {
    return fetch(url, {credentials: "same-origin", headers: {"X-Requested-With": "live"}}).then(function (response) {
      if (response.status !== 200 && response.status !== 204) { throw new Error(String(response.status)); }
      return response;
    });
  }

  function followFragment(region) {
    poll(region, function () {
      return get(region.getAttribute("data-live-url")).then(function (response) {
        return response.status === 204 ? null : response.text();
      }).then(function (html) {
        if (html !== null) { region.innerHTML = html; }
        return true;
      });
    });
  }

  function followRegions(marker) {
    poll(marker, function () {
      var url = marker.getAttribute("data-live-page");
      var since = (url.indexOf("?") < 0 ? "?" : "&") + "since=" + encodeURIComponent(marker.getAttribute("data-live-version"));
      return get(url + since).then(function (response) {
        return response.status === 204 ? null : response.text();
      }).then(function (html) {
        if (html === null) { return true; }
        var fresh = new DOMParser().parseFromString(html, "text/html");
        var regions = document.querySelectorAll("[data-live-region]");
        for (var i = 0; i < regions.length; i++) {
          var replacement = fresh.getElementById(regions[i].id);
          if (replacement && !busy(regions[i])) { regions[i].replaceWith(document.importNode(replacement, true)); }
        }
        var next = fresh.getElementById(marker.id);
        if (!next) { return false; }  // the job has ended: nothing will change any more
        marker.setAttribute("data-live-version", next.getAttribute("data-live-version"));
        return true;
      });
    });
  }

  function start() {
    var fragments = document.querySelectorAll("[data-live-url]");
    for (var i = 0; i < fragments.length; i++) { followFragment(fragments[i]); }
    var markers = document.querySelectorAll("[data-live-version]");
    for (var j = 0; j < markers.length; j++) { followRegions(markers[j]); }
  }

  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", start); } else { start(); }
})();
