// A live run's page: its rows follow the run's journal over server-sent events, without a reload.
// Values are set as text only; the card's address is followed once the run has written it.
"use strict";
(function () {
  const table = document.getElementById("live");
  if (!table || !window.EventSource) return;
  const source = new EventSource(table.dataset.events);
  const body = table.tBodies[0];
  const fields = Array.from(table.tHead.rows[0].cells).slice(1).map((_, i) => i);
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
    });
    document.getElementById("live-total").textContent = String(data.total);
  });
  source.addEventListener("card", (event) => {
    source.close();
    if (/^\/run\/[0-9a-f]+$/.test(event.data)) window.location.assign(event.data);
  });
  source.addEventListener("gone", () => source.close());
})();
