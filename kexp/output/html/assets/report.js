// kexp report: sort a table by clicking a column header; filter its rows with a text box.
// Reads and moves existing rows only (textContent, never HTML): no text becomes markup.
"use strict";

function cellValue(row, index, numeric) {
  const cell = row.cells[index];
  const value = cell ? cell.textContent.trim() : "";
  if (!numeric) {
    return value.toLowerCase();
  }
  const number = parseFloat(value.replace(/,/g, ""));
  return Number.isNaN(number) ? -Infinity : number;
}

function sortBy(table, header) {
  const index = header.cellIndex;
  const numeric = header.classList.contains("num");
  const ascending = !header.classList.contains("asc");
  for (const other of table.tHead.rows[0].cells) {
    other.classList.remove("asc", "desc");
  }
  header.classList.add(ascending ? "asc" : "desc");
  const body = table.tBodies[0];
  const rows = Array.from(body.rows).map((row, position) => [cellValue(row, index, numeric), position, row]);
  rows.sort((a, b) => {
    if (a[0] < b[0]) return ascending ? -1 : 1;
    if (a[0] > b[0]) return ascending ? 1 : -1;
    return a[1] - b[1];
  });
  const fragment = document.createDocumentFragment();
  for (const entry of rows) {
    fragment.appendChild(entry[2]);
  }
  body.appendChild(fragment);
}

function filterRows(table, query) {
  const wanted = query.trim().toLowerCase();
  for (const row of table.tBodies[0].rows) {
    const shown = !wanted || row.textContent.toLowerCase().includes(wanted);
    row.classList.toggle("hidden", !shown);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  for (const table of document.querySelectorAll("table.sortable")) {
    if (!table.tHead || !table.tBodies.length) continue;
    for (const header of table.tHead.rows[0].cells) {
      header.title = "sort";
      header.addEventListener("click", () => sortBy(table, header));
    }
  }
  for (const box of document.querySelectorAll("input[data-filter]")) {
    const table = document.getElementById(box.dataset.filter);
    if (!table) continue;
    box.addEventListener("input", () => filterRows(table, box.value));
  }
});
