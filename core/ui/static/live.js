// live.js keeps a page current without a reload: every few seconds it
// asks the server for the same address again and, when the page's main
// content changed, puts the new content in its place. It waits while the
// tab is hidden or the user is typing in a form, and backs off while the
// server does not answer. No inline script: the CSP allows this file alone.
(function () {
  "use strict";
  var main = document.getElementById("main");
  if (!main || !window.fetch || !window.DOMParser) {
    return;
  }
  var every = 3000;
  var delay = every;
  function busy() {
    var a = document.activeElement;
    return a && a !== document.body && (a.form || /^(INPUT|TEXTAREA|SELECT|BUTTON)$/.test(a.tagName));
  }
  function next() {
    window.setTimeout(tick, delay);
  }
  function tick() {
    if (document.hidden || busy()) {
      next();
      return;
    }
    fetch(window.location.href, { credentials: "same-origin", cache: "no-store", headers: { "X-Drover-Live": "1" } })
      .then(function (r) {
        if (!r.ok) {
          throw new Error("status " + r.status);
        }
        return r.text();
      })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("main");
        if (fresh && fresh.innerHTML !== main.innerHTML && !busy()) {
          main.innerHTML = fresh.innerHTML;
        }
        main.setAttribute("data-live", "ok");
        delay = every;
      })
      .catch(function () {
        main.setAttribute("data-live", "stale");
        delay = Math.min(delay * 2, 60000);
      })
      .then(next);
  }
  next();
})();
