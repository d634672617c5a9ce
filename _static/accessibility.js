// pydata-sphinx-theme's search and colour-mode buttons, and myst-nb's toggles of folded cells, have accessible names
// that leave out the text they show (axe-core: label-content-name-mismatch, WCAG 2.5.3 "label in name"). The search buttons are named by the words they
// show; the colour-mode button keeps its name ("Color mode") and its icons, decorative, are hidden from screen readers.
// bertviz's views (chapter 8) write the name of each drop-down list as text before it ("Layer:", "Head:"), not as a
// <label> (axe-core: select-name, critical): a list without a name is named by the text just before it.
(function () {
  function nameSelectsByTheirText() {
    var unnamed = "select:not([aria-label]):not([aria-labelledby]):not([title])";
    document.querySelectorAll(unnamed).forEach(function (select) {
      if (select.labels && select.labels.length) return;
      var node = select.previousSibling, text = "";
      while (node && !text) {
        text = (node.textContent || "").replace(/\s+/g, " ").trim();
        node = node.previousSibling;
      }
      text = text.replace(/:$/, "").trim();
      if (text) select.setAttribute("aria-label", text);
    });
  }
  function nameButtonsAsShown() {
    // myst-nb's toggles of folded cells (hide-input: the exercises' checks) are <summary> elements labelled
    // "Toggle hidden content" while they show "Show code cell source": without the label, they are named by the
    // words they show.
    document.querySelectorAll('summary[aria-label="Toggle hidden content"]').forEach(function (summary) {
      summary.removeAttribute("aria-label");
    });
    document.querySelectorAll(".search-button-field").forEach(function (button) {
      button.setAttribute("aria-label", button.textContent.replace(/\s+/g, " ").trim());
    });
    document.querySelectorAll(".theme-switch-button .theme-switch").forEach(function (icon) {
      icon.setAttribute("aria-hidden", "true");
      icon.removeAttribute("role");
      icon.removeAttribute("aria-labelledby");
      icon.querySelectorAll("title").forEach(function (title) { title.remove(); });
    });
  }
  // Font Awesome replaces the <i> icons by <svg> ones (with a <title>) at some point after the page has loaded.
  var observer = new MutationObserver(nameButtonsAsShown);
  function start() {
    nameButtonsAsShown();
    nameSelectsByTheirText();
    document.querySelectorAll(".theme-switch-button").forEach(function (button) {
      observer.observe(button, { childList: true, subtree: true });
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
