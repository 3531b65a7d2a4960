// The transaction inspector's live refresh: every few seconds <main> is fetched again from the
// same URL (the server answers only the main part when asked with X-Inspector-Fragment) and
// replaced. Paused while a field in the page has focus or the page opts out (data-refresh="0").
(function () {
  "use strict";
  var box = document.getElementById("live");
  var every = document.getElementById("every");
  var stamp = document.getElementById("updated");
  var key = "inspector.live";
  var saved = {};
  try { saved = JSON.parse(localStorage.getItem(key) || "{}"); } catch (e) { saved = {}; }
  if (box && typeof saved.on === "boolean") box.checked = saved.on;
  if (every && saved.every) every.value = saved.every;
  function save() {
    try { localStorage.setItem(key, JSON.stringify({ on: box.checked, every: every.value })); } catch (e) { /* private mode */ }
  }
  if (box) box.addEventListener("change", function () { save(); schedule(); });
  if (every) every.addEventListener("change", function () { save(); schedule(); });
  var timer = null;
  var busy = false;
  function paused() {
    var main = document.getElementById("view");
    if (!main || main.getAttribute("data-refresh") === "0") return true;
    var a = document.activeElement;
    return a && main.contains(a) && /^(INPUT|SELECT|TEXTAREA)$/.test(a.tagName);
  }
  function refresh() {
    if (busy || paused() || (box && !box.checked)) return schedule();
    busy = true;
    fetch(location.href, { headers: { "X-Inspector-Fragment": "1" }, cache: "no-store" })
      .then(function (r) { if (!r.ok) throw new Error("HTTP " + r.status); return r.text(); })
      .then(function (html) {
        var main = document.getElementById("view");
        if (main && !paused()) {
          main.innerHTML = html;
          if (stamp) stamp.textContent = "updated " + new Date().toLocaleTimeString();
        }
      })
      .catch(function (e) { if (stamp) stamp.textContent = "broker unreachable (" + e.message + ")"; })
      .then(function () { busy = false; schedule(); });
  }
  function schedule() {
    if (timer) clearTimeout(timer);
    timer = null;
    if (box && box.checked) timer = setTimeout(refresh, (parseFloat(every && every.value) || 2) * 1000);
  }
  // timestamps are rendered in UTC by the broker; show them in local time on hover
  document.addEventListener("mouseover", function (ev) {
    var t = ev.target;
    if (t && t.getAttribute && t.getAttribute("data-ms") && !t.title) {
      t.title = new Date(parseInt(t.getAttribute("data-ms"), 10)).toString();
    }
  });
  schedule();
})();
