// The overview's activity chart: one uPlot chart per currency, from the JSON the page carries
// (#activity-data). Entries on the left axis, stakes and payouts on the right. Display only:
// amounts arrive as exact decimal text and become numbers here only to be drawn.
(function () {
  "use strict";
  function draw() {
    var holder = document.getElementById("activity-charts");
    var source = document.getElementById("activity-data");
    if (!holder || !source || typeof uPlot === "undefined") return;
    var data = JSON.parse(source.textContent);
    var currencies = Object.keys(data.currencies).sort();
    holder.textContent = "";
    if (!currencies.length) {
      var none = document.createElement("p");
      none.className = "muted";
      none.textContent = "Nothing to draw yet.";
      holder.appendChild(none);
      return;
    }
    currencies.forEach(function (currency) {
      var found = data.currencies[currency];
      var box = document.createElement("figure");
      box.className = "chart";
      var caption = document.createElement("figcaption");
      caption.textContent = currency;
      box.appendChild(caption);
      holder.appendChild(box);
      var width = Math.max(280, Math.min(box.clientWidth || holder.clientWidth, 1150));
      new uPlot({
        width: width,
        height: 220,
        scales: { x: { time: true }, n: {}, money: {} },
        axes: [
          {},
          { scale: "n", label: "entries" },
          { scale: "money", side: 1, label: currency, grid: { show: false } },
        ],
        series: [
          {},
          { label: "entries", scale: "n", stroke: "#0b5cad", fill: "rgba(11,92,173,.08)", width: 1.5 },
          { label: "stakes", scale: "money", stroke: "#1a7f37", width: 1.5 },
          { label: "payouts", scale: "money", stroke: "#b42318", width: 1.5 },
        ],
      }, [data.x, found.entries, found.stakes.map(Number), found.payouts.map(Number)], box);
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", draw);
  } else {
    draw();
  }
})();
