// MathJax for pymdownx.arithmatex (generic mode): render \( \) and \[ \] spans
window.MathJax = {
  tex: {
    inlineMath: [["\\(", "\\)"]],
    displayMath: [["\\[", "\\]"]],
    processEscapes: true,
    processEnvironments: true,
  },
  options: {
    ignoreHtmlClass: ".*|",
    processHtmlClass: "arithmatex",
  },
};
document$.subscribe(() => {
  MathJax.typesetPromise();
});
