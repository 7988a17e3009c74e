/* The navigation menu on narrow screens: collapsed behind its "Menu" button, opened and closed by it.
   A file, not inline code: the Content-Security-Policy runs scripts from the site's own files only. Without
   scripts the class below is never set and the menu simply wraps under the brand (portal.css). */
(function () {
  document.documentElement.classList.add("js-menu");
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest(".menu-toggle");
    if (!button) { return; }
    var open = button.getAttribute("aria-expanded") === "true";
    button.setAttribute("aria-expanded", open ? "false" : "true");
  });
  // The language choice applies as soon as it is picked (without scripts: its Apply button).
  document.addEventListener("change", function (event) {
    if (event.target.id === "id_site_language") { event.target.form.submit(); }
  });
  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape") { return; }
    var button = document.querySelector(".menu-toggle[aria-expanded='true']");
    if (button) { button.setAttribute("aria-expanded", "false"); button.focus(); }
  });
}());
