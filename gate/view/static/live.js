// A live run's page: its rows and sequential paths follow the run over server-sent events, without a reload.
// Values are set as text only, and a path arrives as element data built here with DOM calls, never as
// markup to parse; the card's address is followed once the run has written it.
"use strict";
(function () {
  const table = document.getElementById("live");
  if (!table || !window.EventSource) return;
  const source = new EventSource(table.dataset.events);
  const body = table.tBodies[0];
  const fields = Array.from(table.tHead.rows[0].cells).slice(1).map((_, i) => i);
  const plots = document.getElementById("live-paths");
  const SVG = "http://www.w3.org/2000/svg";
  const SVG_TAGS = new Set(["svg", "g", "line", "polyline", "circle", "text", "title"]);
  const HTML_TAGS = new Set(["div", "p"]);

  // [tag, attributes, text, children] -> an element; any other tag, or an attribute that could run or
  // load something (on*, href, src, style), is left out.
  function build(tree) {
    const [tag, attrs, text, children] = tree;
    const element = SVG_TAGS.has(tag) ? document.createElementNS(SVG, tag)
      : HTML_TAGS.has(tag) ? document.createElement(tag) : null;
    if (!element) return null;
    for (const [name, value] of Object.entries(attrs)) {
      if (/^[A-Za-z][A-Za-z0-9-]*$/.test(name) && !/^(on|href|src|style)/i.test(name)) {
        element.setAttribute(name, String(value));
      }
    }
    if (text) element.textContent = text;
    for (const child of children) {
      const built = build(child);
      if (built) element.appendChild(built);
    }
    return element;
  }

  function showPath(i, tree) {
    const id = "live-path-" + i;
    const old = document.getElementById(id);
    if (!tree) {
      if (old) old.remove();
      return;
    }
    const built = build(tree);
    if (!built || built.id !== id) return;
    if (old) old.replaceWith(built);
    else plots.appendChild(built);
    plots.hidden = false;
  }

  source.addEventListener("rows", (event) => {
    const data = JSON.parse(event.data);
    data.rows.forEach((row, i) => {
      let tr = document.getElementById("live-" + i);
      if (!tr) {
        tr = body.insertRow();
        tr.id = "live-" + i;
        tr.insertCell().textContent = row.property;
        const template = body.rows[0];
        fields.forEach((j) => {
          const cell = tr.insertCell();
          cell.className = "num";
          if (template && template.cells[j + 1]) cell.dataset.field = template.cells[j + 1].dataset.field;
        });
      }
      tr.dataset.property = row.property;
      for (const cell of tr.querySelectorAll("td[data-field]")) {
        const value = row[cell.dataset.field];
        if (typeof value === "string" && cell.textContent !== value) cell.textContent = value;
      }
      if (plots) showPath(i, row.path);
    });
    document.getElementById("live-total").textContent = String(data.total);
  });
  source.addEventListener("card", (event) => {
    source.close();
    if (/^\/run\/[0-9a-f]+$/.test(event.data)) window.location.assign(event.data);
  });
  source.addEventListener("gone", () => source.close());
})();
