// rayform ui: the few behaviours the server-rendered pages need (no framework, no network
// beyond this server). The episode page's cursor drives the cameras and the plots' cursor lines.
"use strict";

function latestAt(times, t) {
  // index of the last time <= t (0 when t is before the first)
  let lo = 0, hi = times.length - 1, best = 0;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (times[mid] <= t + 1e-9) { best = mid; lo = mid + 1; } else { hi = mid - 1; }
  }
  return best;
}

function episodePage(episode) {
  const duration = episode.axis.duration_s || 0;
  const slider = document.getElementById("cursor");
  const label = document.getElementById("cursor-time");
  const lines = Array.from(document.querySelectorAll(".cursor-line"));
  const cameras = episode.cameras.map((camera, i) => ({ ...camera, el: document.getElementById("camera-" + i),
    frameLabel: document.getElementById("frame-" + i), row: -1 }));
  let cursor = 0;

  for (const cam of cameras) {
    if (cam.kind === "image") continue;
    const video = cam.el;
    const playable = video.canPlayType(cam.mime) !== "";
    cam.usingFallback = !playable;
    video.src = playable ? cam.url : cam.fallback_url;
    video.addEventListener("error", () => {
      if (!cam.usingFallback) { cam.usingFallback = true; video.src = cam.fallback_url; video.load(); }
    });
    video.addEventListener("loadeddata", () => showCamera(cam, true));
  }

  function showCamera(cam, force) {
    if (!cam.times_s.length) return;
    const row = latestAt(cam.times_s, cursor);
    if (row === cam.row && !force) return;
    cam.row = row;
    cam.frameLabel.textContent = "frame " + row;
    if (cam.kind === "image") {
      cam.el.src = cam.url + "&row=" + row;
      cam.el.dataset.row = String(row);
    } else {
      // a hair past the frame's own time, so the browser shows that frame and not the one before
      const target = cam.video_s[row] + 0.0005;
      if (Math.abs(cam.el.currentTime - target) > 0.0004) cam.el.currentTime = target;
      cam.el.dataset.row = String(row);
    }
  }

  function setCursor(t) {
    cursor = Math.min(Math.max(Number(t) || 0, 0), duration);
    slider.value = String(cursor);
    label.textContent = cursor.toFixed(3) + " s";
    const x = duration > 0 ? (cursor / duration) * episode.plot_width : 0;
    for (const line of lines) { line.setAttribute("x1", x); line.setAttribute("x2", x); }
    for (const cam of cameras) showCamera(cam, false);
  }

  slider.addEventListener("input", () => setCursor(slider.value));
  for (const svg of document.querySelectorAll("svg.signal, svg.notes-track")) {
    svg.addEventListener("click", (event) => {
      const box = svg.getBoundingClientRect();
      setCursor(((event.clientX - box.left) / box.width) * duration);
    });
  }

  let playing = false, last = 0;
  const play = document.getElementById("play");
  function tick(now) {
    if (!playing) return;
    const step = (now - last) / 1000;
    last = now;
    if (cursor + step >= duration) { setCursor(duration); playing = false; play.textContent = "play"; return; }
    setCursor(cursor + step);
    requestAnimationFrame(tick);
  }
  play.addEventListener("click", () => {
    playing = !playing;
    play.textContent = playing ? "pause" : "play";
    if (playing) { if (cursor >= duration) setCursor(0); last = performance.now(); requestAnimationFrame(tick); }
  });

  const copy = document.getElementById("copy-view");
  copy.addEventListener("click", () => {
    const text = document.getElementById("view-command").textContent;
    if (navigator.clipboard) navigator.clipboard.writeText(text).then(() => { copy.textContent = "copied"; });
  });

  window.rayformUi = { setCursor, cursor: () => cursor, cameras };
  setCursor(0);
}

function formatNumber(v) {
  if (v === null || v === undefined) return "";
  if (typeof v === "number") return Number.isInteger(v) ? String(v) : String(Number(v.toPrecision(4)));
  return String(v);
}

async function statisticsSection(div) {
  try {
    const reply = await fetch(div.dataset.src);
    const body = await reply.json();
    if (!reply.ok) { div.textContent = body.error || reply.statusText; return; }
    const rows = body.statistics;
    if (!rows.length) { div.textContent = "No numeric column."; return; }
    const columns = ["column", "dim", "name", "count", "min", "max", "mean", "std", "q01", "q10", "q50", "q90", "q99"];
    const table = document.createElement("table");
    table.className = "grid";
    table.id = "statistics-table";
    const head = table.createTHead().insertRow();
    for (const c of columns) { const th = document.createElement("th"); th.textContent = c; head.appendChild(th); }
    const tbody = table.createTBody();
    for (const row of rows) {
      const tr = tbody.insertRow();
      for (const c of columns) tr.insertCell().textContent = formatNumber(row[c]);
    }
    div.replaceChildren(table);
  } catch (err) {
    div.textContent = "statistics failed: " + err;
  }
}

function saveSliceButton(button) {
  button.addEventListener("click", async () => {
    const out = document.getElementById("slice-result");
    const name = window.prompt("A name for the slice (optional):", "") ;
    const reply = await fetch("/api/slices", {
      method: "POST", headers: { "content-type": "application/json" },
      body: JSON.stringify({ dataset: button.dataset.dataset, where: button.dataset.where || null, name: name || null }),
    });
    const body = await reply.json();
    out.textContent = reply.ok ? "saved " + body.id + " (" + body.num_segments + " segments)" : body.error;
    out.className = reply.ok ? "ok" : "error";
  });
}

document.addEventListener("DOMContentLoaded", () => {
  const data = document.getElementById("episode-data");
  if (data) episodePage(JSON.parse(data.textContent));
  const stats = document.getElementById("statistics");
  if (stats && stats.dataset.auto === "yes") statisticsSection(stats);
  const compute = document.getElementById("compute-statistics");
  if (compute) compute.addEventListener("click", () => { stats.textContent = "computing…"; statisticsSection(stats); });
  const save = document.getElementById("save-slice");
  if (save) saveSliceButton(save);
});
