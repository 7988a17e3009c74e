/* A refused form: the page opens with the focus on the summary of what is wrong (templates/_form_errors.html),
   scrolled into view, so that nobody has to look for the first error below the fold; a link of the summary
   moves the focus into its field, not only the view. Without scripts the summary is still the first thing
   on the page and its links still jump to the fields. */
(function () {
  function focusSummary() {
    // a refused form's summary, else a warning that asks for a choice before the form is sent (a submission
    // that would stop the user's own running jobs: templates/scheduling/_own_preemptions.html)
    var summary = document.getElementById("error-summary") || document.getElementById("own-preemptions");
    if (!summary) { return; }
    summary.focus();  // scrolls it into view when it is not (it stays below the page's title when it is)
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", focusSummary);
  } else {
    focusSummary();
  }
  document.addEventListener("click", function (event) {
    var link = event.target.closest && event.target.closest("#error-summary a.to-field");
    if (!link) { return; }
    var field = document.getElementById(link.getAttribute("href").slice(1));
    if (!field) { return; }
    event.preventDefault();
    // the field with its label in view: the label sits just above the input
    var box = field.closest(".field") || field;
    box.scrollIntoView({block: "start"});
    field.focus({preventScroll: true});
  });
}());
