// The overview's activity chart: one uPlot chart per currency, from the JSON the page carries
// (#activity-data). Entries on the left axis, stakes and payouts on the right. Display only:
// amounts arrive as exact decimal text and become numbers here only to be drawn. Times read as
// everywhere else in the console: ISO 8601 in UTC, never the browser's zone or locale.
(function () {
  "use strict";
  function iso(seconds) {
    return new Date(seconds * 1000).toISOString().slice(0, 16).replace("T", " ");
  }
  // Hours on the axis; the date under the first tick and under each tick of a new day.
  function ticks(u, splits) {
    var day = null;
    return splits.map(function (seconds) {
      var text = iso(seconds);
      var date = text.slice(0, 10);
      var label = text.slice(11) + (date !== day ? "\n" + date : "");
      day = date;
      return label;
    });
  }
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
        tzDate: function (seconds) { return uPlot.tzDate(new Date(seconds * 1000), "Etc/UTC"); },
        axes: [
          { values: ticks, size: 50 },
          { scale: "n", label: "entries" },
          { scale: "money", side: 1, label: currency, grid: { show: false } },
        ],
        series: [
          { label: "UTC", value: function (u, seconds) { return seconds == null ? "-" : iso(seconds); } },
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
