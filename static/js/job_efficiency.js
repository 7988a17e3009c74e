/* The job page's "GPU use" charts: utilisation (each GPU and their mean) and memory over time, drawn from
   GET /api/jobs/{id}/efficiency/ (the same figures the API and the CLI give). While the job runs, fetched again
   every minute, only while the tab is shown, and the charts redrawn in place (no reload). A file, not an inline
   script: the Content-Security-Policy refuses those. Loaded with defer after plotly-basic.min.js. */
(function () {
  var EVERY = 60000;

  function overall(series) {
    // The mean utilisation of every GPU measured at each time (the series share their bucket starts).
    var sums = {}, counts = {};
    series.forEach(function (s) {
      s.time.forEach(function (t, i) {
        if (s.utilization[i] === null) { return; }
        sums[t] = (sums[t] || 0) + s.utilization[i];
        counts[t] = (counts[t] || 0) + 1;
      });
    });
    var times = Object.keys(sums).sort();
    return {x: times, y: times.map(function (t) { return Math.round(sums[t] / counts[t] * 10) / 10; })};
  }

  function draw(box, data) {
    if (!window.Plotly || !data.series.length) { return; }
    var config = {displaylogo: false, responsive: true};
    var util = data.series.map(function (s) {
      return {type: "scatter", mode: "lines", name: s.gpu, x: s.time, y: s.utilization};
    });
    var mean = overall(data.series);
    util.push({type: "scatter", mode: "lines", name: box.getAttribute("data-overall-name"), x: mean.x, y: mean.y,
               line: {width: 3, color: "#222"}});
    var memory = data.series.map(function (s) {
      return {type: "scatter", mode: "lines", name: s.gpu, x: s.time,
              y: s.memory_mb.map(function (m) { return m === null ? null : Math.round(m / 102.4) / 10; })};
    });
    var layout = function (title, range) {
      return {title: {text: title}, height: 320, margin: {t: 40, r: 10, b: 40, l: 50},
              yaxis: range ? {range: range} : {rangemode: "tozero"}, legend: {orientation: "h"}};
    };
    window.Plotly.react("efficiency-utilization", util, layout(box.getAttribute("data-utilization-title"), [0, 100]),
                        config);
    window.Plotly.react("efficiency-memory", memory, layout(box.getAttribute("data-memory-title"), null), config);
    var none = document.getElementById("eff-none");
    if (none) { none.hidden = true; }
  }

  function start() {
    var box = document.getElementById("efficiency");
    if (!box || !document.getElementById("efficiency-utilization")) { return; }
    var url = box.getAttribute("data-efficiency-url");
    var live = box.getAttribute("data-live") === "1";
    var timer = null;

    function refresh() {
      timer = null;
      fetch(url, {credentials: "same-origin", headers: {"Accept": "application/json"}})
        .then(function (response) {
          if (!response.ok) { throw new Error(String(response.status)); }
          return response.json();
        })
        .then(function (data) {
          draw(box, data);
          if (data.finished) { live = false; }
          if (live) { schedule(); }
        })
        .catch(function () {
          var none = document.getElementById("eff-none");
          if (none) { none.textContent = box.getAttribute("data-error-text"); }
          if (live) { schedule(); }
        });
    }
    function schedule() { if (!document.hidden && timer === null) { timer = window.setTimeout(refresh, EVERY); } }

    document.addEventListener("visibilitychange", function () {
      if (document.hidden && timer !== null) { window.clearTimeout(timer); timer = null; }
      else if (!document.hidden && live && timer === null) { refresh(); }
    });
    refresh();
  }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", start); } else { start(); }
})();
