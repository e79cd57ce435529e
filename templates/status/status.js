// Plan Cascade status page: refresh the page's <main> in place every few seconds.
// The server renders it (one renderer for the first paint and every update, all text escaped
// there); this script only fetches it with `X-Status-Partial: 1` and swaps it in, keeping
// which <details> are open; an answer equal to what is shown leaves the page (and the
// announcement of updates) untouched.
// It pauses while the tab is hidden and stops when signed out.
(function () {
  "use strict";
  var seconds = Number(document.body.getAttribute("data-refresh")) || 0;
  var live = document.getElementById("live");
  if (!seconds || !document.getElementById("content")) { return; }
  var timer = null;
  var busy = false;

  function say(text) { if (live) { live.textContent = text; } }

  function openDetails(root) {
    var ids = [];
    root.querySelectorAll("details[open][id]").forEach(function (d) { ids.push(d.id); });
    return ids;
  }

  function swap(html) {
    var current = document.getElementById("content");
    var parsed = new DOMParser().parseFromString(html, "text/html");
    var fresh = parsed.getElementById("content");
    if (!current || !fresh) { return false; }
    var open = openDetails(current);
    fresh.querySelectorAll("details[id]").forEach(function (d) {
      if (open.indexOf(d.id) !== -1) { d.open = true; }
    });
    // Nothing changed: keep the page as it is, so a reader's selection and focus survive.
    if (fresh.innerHTML === current.innerHTML) { return false; }
    current.replaceWith(document.adoptNode(fresh));
    return true;
  }

  function refresh() {
    if (busy || document.hidden) { return; }
    busy = true;
    fetch(location.pathname + location.search, {
      headers: { "X-Status-Partial": "1" },
      credentials: "same-origin",
      cache: "no-store"
    }).then(function (response) {
      if (response.status === 401) {
        say("signed out: reload to sign in");
        clearInterval(timer);
        return null;
      }
      if (!response.ok) { throw new Error("HTTP " + response.status); }
      return response.text();
    }).then(function (html) {
      if (html !== null) {
        var now = new Date();
        if (swap(html)) {
          say("updated " + now.toLocaleTimeString());
        } else if (live) {  // unchanged: nothing to announce (the region is aria-live)
          if (live.textContent.indexOf("not updated") === 0) { say("live"); }
          live.setAttribute("data-checked", now.toISOString());
        }
      }
    }).catch(function (error) {
      say("not updated: " + error.message);
    }).then(function () { busy = false; });
  }

  var filters = document.getElementById("filters");
  if (filters) {
    filters.querySelectorAll("select").forEach(function (select) {
      select.addEventListener("change", function () { filters.submit(); });
    });
  }
  say("live");
  timer = setInterval(refresh, seconds * 1000);
  document.addEventListener("visibilitychange", function () { if (!document.hidden) { refresh(); } });
}());
