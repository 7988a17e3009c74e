/* The charts of the report pages. Each <div data-figure=ID> has its plotly figure in <script id=ID
   type=application/json> (data, never executed: the Content-Security-Policy refuses inline scripts).
   A chart is drawn when it comes near the viewport, not all of them at load: drawing the 12-13 charts of a
   report at once cost most of a second. Printing draws those not drawn yet first. A drawn chart carries
   data-rendered="1". Loaded with defer after plotly.min.js, so Plotly is there when this runs. */
(function () {
  var config = {displaylogo: false, responsive: true};

  function draw(div) {
    if (div.hasAttribute("data-drawing") || !window.Plotly) { return; }
    var source = document.getElementById(div.getAttribute("data-figure"));
    if (!source) { return; }
    div.setAttribute("data-drawing", "1");
    var figure = JSON.parse(source.textContent);
    var layout = Object.assign({autosize: true}, figure.layout || {});
    window.Plotly.newPlot(div, figure.data || [], layout, config)
      .then(function () { div.setAttribute("data-rendered", "1"); });
  }

  function start() {
    var charts = Array.prototype.slice.call(document.querySelectorAll("[data-figure]"));
    if (!("IntersectionObserver" in window)) { charts.forEach(draw); return; }
    // Half a screen ahead, so that a chart is usually drawn before it scrolls in.
    var observer = new IntersectionObserver(function (entries) {
      entries.forEach(function (entry) {
        if (entry.isIntersecting) { observer.unobserve(entry.target); draw(entry.target); }
      });
    }, {rootMargin: "50% 0px"});
    charts.forEach(function (div) { observer.observe(div); });
    window.addEventListener("beforeprint", function () { charts.forEach(draw); });
  }

  // The "print" link: a listener here, since the Content-Security-Policy refuses inline onclick handlers.
  document.addEventListener("click", function (event) {
    var link = event.target.closest && event.target.closest("[data-print]");
    if (link) { event.preventDefault(); window.print(); }
  });
  window.addEventListener("beforeprint", function () {
    document.querySelectorAll("details.data").forEach(function (d) { d.open = true; });
  });
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", start); } else { start(); }
})();
