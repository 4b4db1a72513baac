// The overview's activity chart: one uPlot chart per currency, from the JSON the page carries
// (#activity-data). Entries on the left axis, stakes and payouts on the right. Display only:
// amounts arrive as exact decimal text and become numbers here only to be drawn. Times read as
// everywhere else in the console: ISO 8601 in UTC, never the browser's zone or locale.
(function () {
  "use strict";
  function iso(seconds) {
    return new Date(seconds * 1000).toISOString().slice(0, 16).replace("T", " ");
  }
  // Hours on the axis; the date under the first tick and under each tick of a new day. The
  // labels drawn are also left on the chart's figure (data-ticks): the canvas holds no text.
  function ticks(u, splits) {
    var day = null;
    var labels = splits.map(function (seconds) {
      var text = iso(seconds);
      var date = text.slice(0, 10);
      var label = text.slice(11) + (date !== day ? "\n" + date : "");
      day = date;
      return label;
    });
    var figure = u.root.parentNode;
    if (figure) figure.dataset.ticks = labels.join(" | ").replace(/\n/g, " ");
    return labels;
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
        // Half an hour of margin each side: the first and last hours' bars are drawn whole.
        scales: {
          x: { time: true, range: function (u, min, max) { return [min - 1800, max + 1800]; } },
          n: {},
          money: {},
        },
        tzDate: function (seconds) { return uPlot.tzDate(new Date(seconds * 1000), "Etc/UTC"); },
        axes: [
          // Ticks on whole hours only: the figures are per hour.
          { values: ticks, size: 50, incrs: [3600, 7200, 10800, 21600, 43200, 86400, 172800] },
          { scale: "n", label: "entries" },
          { scale: "money", side: 1, label: currency, grid: { show: false } },
        ],
        series: [
          { label: "UTC", value: function (u, seconds) { return seconds == null ? "-" : iso(seconds); } },
          // Entries as a bar per hour: a few busy hours read as bars, not as a slope.
          {
            label: "entries", scale: "n", stroke: "#0b5cad", fill: "rgba(11,92,173,.25)", width: 1,
            paths: uPlot.paths.bars({ size: [0.6, 24] }), points: { show: false },
          },
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
