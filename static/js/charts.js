/* Draw every chart of the page: each <div data-figure=ID> has its plotly figure in <script id=ID type=application/json>. */
(function () {
  function draw() {
    if (!window.Plotly) { return; }
    document.querySelectorAll("[data-figure]").forEach(function (div) {
      var source = document.getElementById(div.getAttribute("data-figure"));
      if (!source) { return; }
      var figure = JSON.parse(source.textContent);
      var layout = Object.assign({autosize: true}, figure.layout || {});
      window.Plotly.newPlot(div, figure.data || [], layout, {displaylogo: false, responsive: true})
        .then(function () { div.setAttribute("data-rendered", "1"); });
    });
  }
  // The "print" link: a listener here, since the Content-Security-Policy refuses inline onclick handlers.
  document.addEventListener("click", function (event) {
    var link = event.target.closest && event.target.closest("[data-print]");
    if (link) { event.preventDefault(); window.print(); }
  });
  window.addEventListener("beforeprint", function () {
    document.querySelectorAll("details.data").forEach(function (d) { d.open = true; });
  });
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", draw); } else { draw(); }
})();
