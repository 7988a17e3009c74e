// Forms with data-confirm ask before they are sent (the job page's Cancel): a static file, as the
// Content-Security-Policy allows no inline script. Without scripts the form is sent at once.
document.addEventListener("submit", function (event) {
  var form = event.target;
  var question = form.getAttribute && form.getAttribute("data-confirm");
  if (question && !window.confirm(question)) {
    event.preventDefault();
  }
});
