// The labelling queue's keys: each element with data-key="k" is clicked (a button, a link) or
// focused (the note) when k is pressed, except while typing, where Escape leaves the field.
document.addEventListener("keydown", (event) => {
  if (event.ctrlKey || event.metaKey || event.altKey) return;
  if (event.target.closest("input, textarea, select")) {
    if (event.key === "Escape") event.target.blur();
    return;
  }
  const target = document.querySelector(`[data-key="${CSS.escape(event.key)}"]`);
  if (!target) return;
  event.preventDefault();
  if (target.matches("textarea, input")) target.focus();
  else target.click();
});
