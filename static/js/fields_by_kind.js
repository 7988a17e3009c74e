// A form with a "kind" choice (the submit form, the request form) shows only the fields of the chosen kind: each
// field's input names the kinds that use it (data-kinds, from the form's FIELDS_BY_KIND); fields without
// data-kinds serve every kind. Hidden fields are disabled, so they are left out of what is sent. A static file,
// as the Content-Security-Policy allows no inline script; without scripts every field shows.
(function () {
  var kind = document.getElementById("id_kind");
  if (!kind) { return; }
  function show() {
    var inputs = document.querySelectorAll("[data-kinds]");
    for (var i = 0; i < inputs.length; i++) {
      var used = inputs[i].getAttribute("data-kinds").split(" ").indexOf(kind.value) >= 0;
      var box = inputs[i].closest(".field");
      if (box) { box.hidden = !used; }
      inputs[i].disabled = !used;
    }
  }
  kind.addEventListener("change", show);
  show();
})();
