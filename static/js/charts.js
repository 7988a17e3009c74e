/* The charts of the report pages. Each <div data-figure=ID> has its plotly figure in <script id=ID
   type=application/json> (data, never executed: the Content-Security-Policy refuses inline scripts).
   A chart is drawn when it comes near the viewport, not all of them at load: drawing the 12-13 charts of a
   report at once cost most of a second. Printing draws those not drawn yet first. A drawn chart carries
   data-rendered="1". Loaded with defer after plotly.min.js, so Plotly is there when this runs. */
(function () {
  var config = {displaylogo: false, responsive: true};
  // Dates and numbers in the page's language, from these few lines (plotly's locale files would be another
  // download, and nothing may come from the internet): Chinese readers saw "Nov 1".
  var LOCALES = {
    "zh-CN": {format: {
      days: ["星期日", "星期一", "星期二", "星期三", "星期四", "星期五", "星期六"],
      shortDays: ["周日", "周一", "周二", "周三", "周四", "周五", "周六"],
      months: ["一月", "二月", "三月", "四月", "五月", "六月", "七月", "八月", "九月", "十月", "十一月", "十二月"],
      shortMonths: ["1月", "2月", "3月", "4月", "5月", "6月", "7月", "8月", "9月", "10月", "11月", "12月"],
      periods: ["上午", "下午"], date: "%Y-%m-%d", time: "%H:%M:%S", dateTime: "%Y年%-m月%-d日 %H:%M:%S",
      year: "%Y年", month: "%Y年%-m月", dayMonth: "%-m月%-d日", dayMonthYear: "%Y年%-m月%-d日",
      decimal: ".", thousands: ",", grouping: [3], currency: ["¥", ""]
    }}
  };
  var lang = (document.documentElement.lang || "en").toLowerCase();
  if (lang.indexOf("zh") === 0) { config.locale = "zh-CN"; config.locales = LOCALES; }
  // On a phone the legend goes under the plot (above it, it took the plot's height and the tool bar covered
  // it) and the tool bar is hidden: zooming by touch still works.
  var small = window.matchMedia && window.matchMedia("(max-width: 600px)").matches;
  if (small) { config.displayModeBar = false; }

  function draw(div) {
    if (div.hasAttribute("data-drawing") || !window.Plotly) { return; }
    var source = document.getElementById(div.getAttribute("data-figure"));
    if (!source) { return; }
    div.setAttribute("data-drawing", "1");
    var figure = JSON.parse(source.textContent);
    var layout = Object.assign({autosize: true}, figure.layout || {});
    if (small) {
      // About 70 px under the plot, whatever its height: below the tick labels, not far from them.
      var below = -Math.min(0.2, 70 / (layout.height || 320));
      layout.legend = Object.assign({}, layout.legend || {},
                                    {orientation: "h", x: 0, xanchor: "left", y: below, yanchor: "top"});
    }
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
